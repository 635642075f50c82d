// `rods replay`: rebuild a campaign's projections from its event history into a separate schema
// with the same projection code as live (store/pool/projection.ts), then compare with the live
// projections. Resumable: the rebuild commits its cursor with each batch of rows.
import { createHash } from 'node:crypto';
import type pg from 'pg';
import type { TaskStats } from '../schemas/types.generated.js';
import { lastPlannedStep, planState } from '../store/campaign-plans.js';
import { isRegistered } from '../store/campaigns.js';
import {
  type Cursor,
  campaignEventCount,
  campaignHeadCursor,
  compareCursors,
  cursorOf,
  type RecordedEvent,
  readLog,
  START,
} from '../store/events/event-store.js';
import { applyPoolEvent } from '../store/pool/projection.js';

export interface ReplayOptions {
  campaignId: string;
  /** Replay only decisions and statistics of steps <= toStep. */
  toStep?: number;
  /** Drop an earlier partial rebuild instead of resuming it. */
  fresh?: boolean;
  batchSize?: number;
  onProgress?: (done: number, total: number) => void;
}

export interface TableDiff {
  table: string;
  equal: boolean;
  liveRows: number;
  replayRows: number;
  /** The first rows only in live, and only in the replay (at most 5 each). */
  onlyLive: Record<string, unknown>[];
  onlyReplay: Record<string, unknown>[];
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

const PROJECTION_TABLES = [
  'campaigns',
  'pool_members',
  'pool_versions',
  'candidates',
  'campaign_configs',
] as const;

/** Columns compared per table (creation and update times are not part of the projection's meaning). */
const COMPARED: Record<string, string> = {
  campaigns: 'campaign_id, status, config_version',
  // Every config version and the step it applies from (the thresholds behind the bands).
  campaign_configs: 'campaign_id, version, from_step, config',
  pool_members:
    'campaign_id, task_id, origin, category, task, task_hash, parents, root_seed, depth, added_step, added_version, active, removed_step, removed_version, removed_rule',
  pool_versions: 'campaign_id, version, step',
  candidates:
    'campaign_id, candidate_hash, candidate_id, synthesis_id, seed_task_id, status, candidate, lineage',
  task_stats:
    'campaign_id, task_id, groups, rollouts, mean, m2, latest_mean, latest_variance, ewma, last_step, signal, phi, band, last_event_id',
};

async function prepareSchema(
  c: pg.PoolClient,
  schema: string,
  campaignId: string,
  fresh: boolean,
): Promise<Cursor & { events: number }> {
  // A rebuild from before config versions has no campaign_configs: start it again.
  const exists = await c.query('select 1 where to_regclass($1) is not null', [`${schema}.campaign_configs`]);
  if (exists.rowCount && !fresh) {
    const cp = await c
      .query<{ transaction_id: string; position: number; events: number; campaign_id: string | null }>(
        `select transaction_id, position, events,
              (select campaign_id from ${schema}.replay_checkpoint_owner) as campaign_id
         from ${schema}.replay_checkpoint`,
      )
      .catch(() => ({
        rows: [] as {
          transaction_id: string;
          position: number;
          events: number;
          campaign_id: string | null;
        }[],
      }));
    // A checkpoint is resumed only by the campaign it belongs to (else the schema is rebuilt).
    if (cp.rows[0] && cp.rows[0].campaign_id === campaignId)
      return {
        transactionId: cp.rows[0].transaction_id,
        position: cp.rows[0].position,
        events: cp.rows[0].events,
      };
  }
  await c.query(`drop schema if exists ${schema} cascade`);
  await c.query(`create schema ${schema}`);
  for (const t of PROJECTION_TABLES) {
    await c.query(`create table ${schema}.${t} (like public.${t} including defaults including constraints)`);
  }
  await c.query(`alter table ${schema}.pool_members add primary key (campaign_id, task_id)`);
  await c.query(`alter table ${schema}.pool_versions add primary key (campaign_id)`);
  await c.query(`alter table ${schema}.candidates add primary key (campaign_id, candidate_hash)`);
  await c.query(`alter table ${schema}.candidates add unique (campaign_id, candidate_id)`);
  await c.query(`alter table ${schema}.campaigns add primary key (campaign_id)`);
  await c.query(`alter table ${schema}.campaign_configs add primary key (campaign_id, version)`);
  await c.query(
    `create table ${schema}.task_stats (campaign_id text, task_id text, groups bigint, rollouts bigint, mean float8, m2 float8,
       latest_mean float8, latest_variance float8, ewma float8, last_step bigint, signal float8, phi float8, band text,
       last_event_id uuid, primary key (campaign_id, task_id))`,
  );
  await c.query(
    `create table ${schema}.replay_checkpoint (transaction_id text not null, position bigint not null, events bigint not null)`,
  );
  await c.query(`insert into ${schema}.replay_checkpoint values ('0', 0, 0)`);
  await c.query(`create table ${schema}.replay_checkpoint_owner (campaign_id text not null)`);
  await c.query(`insert into ${schema}.replay_checkpoint_owner values ($1)`, [campaignId]);
  return { ...START, events: 0 };
}

function stepOf(payload: Record<string, unknown>): number | undefined {
  if (typeof payload.step === 'number') return payload.step;
  const stats = payload.stats as { lastStep?: number } | undefined;
  return typeof stats?.lastStep === 'number' ? stats.lastStep : undefined;
}

/** Rebuilds the campaign's projections into its replay schema and compares them with the live ones. */
/** How long replay waits for committed events hidden behind an open transaction. */
const HIDDEN_WAIT_MS = 120_000;

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
    const cp = await prepareSchema(setup, schema, campaignId, opts.fresh ?? false);
    cursor = { transactionId: cp.transactionId, position: cp.position };
    events = cp.events;
  } finally {
    setup.release();
  }
  const resumedFrom = events;
  const total = await campaignEventCount(pool, campaignId);
  // Replay reaches at least every event of the campaign committed now. A reader sees an event
  // only once every transaction older than its own has ended (store/events/event-store.ts), so an empty
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
      const c = await pool.connect();
      try {
        await c.query('begin');
        await c.query(`set local search_path = ${schema}, public`);
        for (const e of page as Array<RecordedEvent & { payload: Record<string, unknown> }>) {
          const step = stepOf(e.payload);
          if (
            opts.toStep !== undefined &&
            step !== undefined &&
            step > opts.toStep &&
            e.type !== 'TaskSeeded'
          )
            continue;
          if (e.type === 'CampaignStarted') {
            await c.query(
              `insert into ${schema}.campaigns (campaign_id, name, config) values ($1, $2, $3) on conflict do nothing`,
              [campaignId, e.payload.name, e.payload.config],
            );
            await c.query(
              `insert into ${schema}.campaign_configs (campaign_id, version, from_step, config) values ($1, 1, 0, $2)
               on conflict do nothing`,
              [campaignId, e.payload.config],
            );
          } else if (e.type === 'TaskStatsUpdated') {
            const s = e.payload.stats as TaskStats;
            await c.query(
              `insert into ${schema}.task_stats values ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14)
               on conflict (campaign_id, task_id) do update set groups = excluded.groups, rollouts = excluded.rollouts,
                 mean = excluded.mean, m2 = excluded.m2, latest_mean = excluded.latest_mean,
                 latest_variance = excluded.latest_variance, ewma = excluded.ewma, last_step = excluded.last_step,
                 signal = excluded.signal, phi = excluded.phi, band = excluded.band, last_event_id = excluded.last_event_id`,
              [
                campaignId,
                e.payload.taskId,
                s.groupCount,
                s.count,
                s.mean,
                s.m2,
                s.latestGroupMean,
                s.latestGroupVariance,
                s.ewma,
                s.lastStep,
                s.signal,
                s.phi,
                s.band,
                e.payload.sourceEventId,
              ],
            );
          } else {
            await applyPoolEvent(c, e.type, e.payload, e.metadata);
          }
        }
        const last = page[page.length - 1]!;
        const next = cursorOf(last);
        if (compareCursors(next, cursor) <= 0) throw new ReplayError('event log cursor did not advance');
        cursor = next;
        events += page.length;
        await c.query(
          `update ${schema}.replay_checkpoint set transaction_id = $1, position = $2, events = $3`,
          [cursor.transactionId, cursor.position, events],
        );
        await c.query('commit');
      } catch (e) {
        await c.query('rollback').catch(() => {});
        throw e;
      } finally {
        c.release();
      }
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
  if (opts.toStep === undefined) {
    for (const t of [...PROJECTION_TABLES, 'task_stats'])
      tables.push(await compareTable(pool, schema, t, campaignId));
  } else {
    tables.push(await compareAtStep(pool, schema, campaignId, opts.toStep));
  }
  return {
    campaignId,
    schema,
    events,
    resumedFrom,
    toStep: opts.toStep ?? null,
    equal: tables.every((t) => t.equal),
    tables,
  };
}

async function compareTable(
  pool: pg.Pool,
  schema: string,
  table: string,
  campaignId: string,
): Promise<TableDiff> {
  const cols = COMPARED[table]!;
  const q = (a: string, b: string) =>
    pool.query(
      `select ${cols} from ${a}.${table} where campaign_id = $1 except all select ${cols} from ${b}.${table} where campaign_id = $1 limit 5`,
      [campaignId],
    );
  const count = async (s: string) =>
    (
      await pool.query<{ n: number }>(`select count(*)::int as n from ${s}.${table} where campaign_id = $1`, [
        campaignId,
      ])
    ).rows[0]!.n;
  const onlyLive = (await q('public', schema)).rows;
  const onlyReplay = (await q(schema, 'public')).rows;
  return {
    table,
    equal: onlyLive.length === 0 && onlyReplay.length === 0,
    liveRows: await count('public'),
    replayRows: await count(schema),
    onlyLive,
    onlyReplay,
  };
}

/** At a past step the live side is the pool state the campaign recorded when it planned that step. */
async function compareAtStep(
  pool: pg.Pool,
  schema: string,
  campaignId: string,
  step: number,
): Promise<TableDiff> {
  const live = await planState<{ version: number; members: { taskId: string }[] }>(pool, campaignId, step);
  if (!live) throw new ReplayError(`no plan recorded for step ${step}`);
  const version = (
    await pool.query<{ version: number }>(
      `select version::int from ${schema}.pool_versions where campaign_id = $1`,
      [campaignId],
    )
  ).rows[0]?.version;
  const members = (
    await pool.query<{ task_id: string }>(
      `select task_id from ${schema}.pool_members where campaign_id = $1 and active order by task_id`,
      [campaignId],
    )
  ).rows.map((r) => r.task_id);
  const liveMembers = live.members.map((m) => m.taskId).sort();
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
