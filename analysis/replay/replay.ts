// `rods replay`: rebuild a campaign's projections from its event history into a separate schema
// with the same projection code as live (platform/store/pool/projection.ts), then compare with the live
// projections. Resumable: the rebuild commits its cursor with each batch of rows.
import { createHash } from 'node:crypto';
import type pg from 'pg';
import { statsOfStepEntry, stepStatsEntries } from '../../domain/task-stats.js';
import { lastPlannedStep, poolAtStep } from '../../platform/store/campaign-plans.js';
import { isRegistered } from '../../platform/store/campaigns.js';
import {
  type Cursor,
  campaignHeadCursor,
  compareCursors,
  countCampaignAfter,
  cursorOf,
  type RecordedEvent,
  readLog,
} from '../../platform/store/events/event-store.js';
import { applyPoolEvent } from '../../platform/store/pool/projection.js';
import {
  compareReplayTable,
  inReplaySchema,
  PROJECTION_TABLES,
  prepareReplaySchema,
  type ReplayedTaskStats,
  replayCampaignStarted,
  replayedPool,
  replayTaskStats,
  saveReplayCursor,
  type TableDiff,
} from '../../platform/store/replay/schema.js';
import type { EventPayloads, TaskStats } from '../../schemas/types.generated.js';

export type { TableDiff };

export interface ReplayOptions {
  campaignId: string;
  /** Replay only decisions and statistics of steps <= toStep. */
  toStep?: number;
  /** Drop an earlier partial rebuild instead of resuming it. */
  fresh?: boolean;
  /**
   * Compare the rebuilt tables with the live ones (default true). A comparison reads every row of
   * the campaign's projections, so its cost grows with what the campaign recorded; the rebuild
   * itself resumes where it stopped and reads only the events since.
   */
  compare?: boolean;
  batchSize?: number;
  onProgress?: (done: number, total: number) => void;
}

export interface ReplayReport {
  campaignId: string;
  schema: string;
  events: number;
  resumedFrom: number;
  toStep: number | null;
  equal: boolean;
  tables: TableDiff[];
}

export class ReplayError extends Error {
  override name = 'ReplayError';
}

/**
 * The replay schema of a campaign: a safe identifier (at most 63 bytes), the campaign's id folded
 * to lower case and underscores for reading, then 64 bits of its SHA-256, so that `Exp-1`, `exp_1`
 * and ids sharing their first 38 characters each get their own schema.
 */
export function replaySchema(campaignId: string): string {
  const s = campaignId
    .toLowerCase()
    .replace(/[^a-z0-9_]/g, '_')
    .slice(0, 38);
  return `replay_${s}_${createHash('sha256').update(campaignId, 'utf8').digest('hex').slice(0, 16)}`;
}

function stepOf(payload: Record<string, unknown>): number | undefined {
  if (typeof payload.step === 'number') return payload.step;
  const stats = payload.stats as { lastStep?: number } | undefined;
  return typeof stats?.lastStep === 'number' ? stats.lastStep : undefined;
}

/**
 * The task statistics an event records: every task of a step's record (phi derived from the
 * signal as the aggregator derives it), or the one task of a TaskStatsUpdated (campaigns
 * recorded before the per-step record).
 */
function replayedStats(e: RecordedEvent & { payload: Record<string, unknown> }): ReplayedTaskStats[] {
  if (e.type === 'StepStatsRecorded') {
    const p = e.payload as unknown as EventPayloads['StepStatsRecorded'];
    return stepStatsEntries(p.tasks).map((t) => ({
      taskId: t.taskId,
      ...statsOfStepEntry(t),
      sourceEventId: null,
    }));
  }
  const p = e.payload as unknown as EventPayloads['TaskStatsUpdated'];
  const s: TaskStats = p.stats;
  return [{ taskId: p.taskId, ...s, sourceEventId: p.sourceEventId }];
}

/** How long replay waits for committed events hidden behind an open transaction. */
const HIDDEN_WAIT_MS = 120_000;

/** Rebuilds the campaign's projections into its replay schema and compares them with the live ones. */
export async function replayCampaign(pool: pg.Pool, opts: ReplayOptions): Promise<ReplayReport> {
  const { campaignId } = opts;
  if (!(await isRegistered(pool, campaignId)))
    throw new ReplayError(`unknown campaign ${JSON.stringify(campaignId)}`);
  if (opts.toStep !== undefined) {
    const last = await lastPlannedStep(pool, campaignId);
    if (opts.toStep > last) {
      throw new ReplayError(
        `step ${opts.toStep} is beyond the campaign's history (last planned step ${last})`,
      );
    }
  }
  const schema = replaySchema(campaignId);
  const batchSize = opts.batchSize ?? 1000;
  const setup = await pool.connect();
  let cursor: Cursor;
  let events: number;
  try {
    const cp = await prepareReplaySchema(setup, schema, campaignId, opts.fresh ?? false);
    cursor = { transactionId: cp.transactionId, position: cp.position };
    events = cp.events;
  } finally {
    setup.release();
  }
  const resumedFrom = events;
  // Progress counts what is left from the checkpoint (an index range), not the whole history again.
  const total = events + (await countCampaignAfter(pool, campaignId, cursor, Number.MAX_SAFE_INTEGER));
  // Replay reaches at least every event of the campaign committed now. A reader sees an event
  // only once every transaction older than its own has ended (platform/store/events/event-store.ts), so an empty
  // page before that point means "not visible yet", not "done": the live projections already
  // hold those events' effects.
  const target: Cursor | undefined = await campaignHeadCursor(pool, campaignId);
  const hiddenSince = { at: 0 };
  // The campaign row itself comes from CampaignStarted (registerCampaign writes it beside the event).
  for (;;) {
    // One pass of the bulk reader over the campaign's events after the cursor (every event a
    // reader can see when the pass starts), each page applied and checkpointed in its own
    // transaction on another connection.
    for await (const page of readLog(pool, { after: cursor, pageSize: batchSize, campaignId })) {
      hiddenSince.at = 0;
      await inReplaySchema(pool, schema, async (c) => {
        for (const e of page as Array<RecordedEvent & { payload: Record<string, unknown> }>) {
          const step = stepOf(e.payload);
          if (
            opts.toStep !== undefined &&
            step !== undefined &&
            step > opts.toStep &&
            e.type !== 'TaskSeeded'
          )
            continue;
          if (e.type === 'CampaignStarted')
            await replayCampaignStarted(c, schema, campaignId, e.payload.name, e.payload.config);
          else if (e.type === 'StepStatsRecorded' || e.type === 'TaskStatsUpdated')
            await replayTaskStats(c, schema, campaignId, replayedStats(e));
          else await applyPoolEvent(c, e.type, e.payload, e.metadata);
        }
        const last = page[page.length - 1]!;
        const next = cursorOf(last);
        if (compareCursors(next, cursor) <= 0) throw new ReplayError('event log cursor did not advance');
        cursor = next;
        events += page.length;
        await saveReplayCursor(c, schema, cursor, events);
      });
      opts.onProgress?.(events, total);
    }
    if (!target || compareCursors(cursor, target) >= 0) break;
    hiddenSince.at ||= Date.now();
    if (Date.now() - hiddenSince.at > HIDDEN_WAIT_MS)
      throw new ReplayError(
        `events of the campaign up to position ${target.position} are committed but not readable after ${HIDDEN_WAIT_MS / 1000} s: a transaction older than them is still open (see pg_stat_activity)`,
      );
    await new Promise((r) => setTimeout(r, 100));
  }

  const tables: TableDiff[] = [];
  if (opts.compare === false) {
    // Rebuilt only: nothing compared, nothing claimed equal.
  } else if (opts.toStep === undefined) {
    for (const t of [...PROJECTION_TABLES, 'task_stats'])
      tables.push(await compareReplayTable(pool, schema, t, campaignId));
  } else {
    tables.push(await compareAtStep(pool, schema, campaignId, opts.toStep));
  }
  return {
    campaignId,
    schema,
    events,
    resumedFrom,
    toStep: opts.toStep ?? null,
    equal: opts.compare !== false && tables.every((t) => t.equal),
    tables,
  };
}

/** At a past step the live side is the pool the campaign's plans recorded up to that step. */
async function compareAtStep(
  pool: pg.Pool,
  schema: string,
  campaignId: string,
  step: number,
): Promise<TableDiff> {
  const live = await poolAtStep(pool, campaignId, step);
  if (!live) throw new ReplayError(`no plan recorded for step ${step}`);
  const { version, members } = await replayedPool(pool, schema, campaignId);
  const liveMembers = live.members;
  const onlyLive = liveMembers
    .filter((t) => !members.includes(t))
    .slice(0, 5)
    .map((taskId) => ({ taskId }));
  const onlyReplay = members
    .filter((t) => !liveMembers.includes(t))
    .slice(0, 5)
    .map((taskId) => ({ taskId }));
  if (version !== live.version)
    onlyLive.unshift({ taskId: `pool version ${live.version} (replay: ${version})` });
  return {
    table: `pool at step ${step}`,
    equal: version === live.version && onlyLive.length === 0 && onlyReplay.length === 0,
    liveRows: liveMembers.length,
    replayRows: members.length,
    onlyLive,
    onlyReplay,
  };
}
