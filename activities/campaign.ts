// Activities of the campaign workflow: all of its I/O. Each is idempotent (deterministic event
// ids, idempotent appends, atomic file writes), so a retry after a crash has the effect of one.
import { mkdir, rename, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { Context } from '@temporalio/activity';
import type pg from 'pg';
import { loadTaskStats } from '../aggregator/stats-query.js';
import { waitForWatermark } from '../aggregator/steps.js';
import type { TaskStats } from '../schemas/types.generated.js';
import type { NewEvent } from '../store/event-store.js';
import { recordEvents } from '../store/pool-projection.js';
import { workerEvent } from './events.js';
import type { ExecutorClient } from './executor-client.js';

export interface CampaignActivityDeps {
  pool: pg.Pool;
  executor: ExecutorClient;
  /** Folder of the JSONL sink (one sub-folder per campaign). */
  sinkDir: string;
}

/** An event as the workflow describes it: the activity adds the schema fingerprint. */
export interface WorkflowEvent {
  eventId: string;
  type: string;
  payload: Record<string, unknown>;
  metadata?: Record<string, unknown>;
}

function toNewEvents(events: WorkflowEvent[]): NewEvent[] {
  return events.map((e) => {
    const { eventId: _id, ...payload } = e.payload;
    return workerEvent(e.type, e.eventId, payload, e.metadata);
  });
}

export function createCampaignActivities(deps: CampaignActivityDeps) {
  return {
    /** Appends events to a stream and projects them in one transaction (no-op on retry). */
    async recordEvents(input: { streamId: string; events: WorkflowEvent[] }): Promise<{ appended: boolean }> {
      const r = await recordEvents(deps.pool, input.streamId, toNewEvents(input.events));
      return { appended: r.appended };
    },

    /** Blocks (heartbeating) until every reward of steps <= step is in the statistics. */
    async awaitStep(input: { campaignId: string; step: number }): Promise<{ step: number }> {
      const ctx = Context.current();
      const ac = new AbortController();
      ctx.cancelled.catch(() => ac.abort());
      const beat = setInterval(() => ctx.heartbeat({ waitingFor: input.step }), 2000);
      try {
        await waitForWatermark(deps.pool, input.campaignId, input.step, { pollMs: 200, signal: ac.signal });
        return { step: input.step };
      } finally {
        clearInterval(beat);
      }
    },

    /** The latest step the aggregator has closed for the campaign (0 when none). */
    async lastClosedStep(input: { campaignId: string }): Promise<number> {
      const { rows } = await deps.pool.query<{ step: number | null }>(
        'select max(step)::bigint as step from steps where campaign_id = $1 and closed_at is not null',
        [input.campaignId],
      );
      return rows[0]?.step ?? 0;
    },

    /** Statistics of the given tasks (only those observed). */
    async loadStats(input: { campaignId: string; taskIds?: string[] }): Promise<Record<string, TaskStats>> {
      return loadTaskStats(deps.pool, input.campaignId, input.taskIds);
    },

    /**
     * Writes the active pool of a version to the JSONL sink in the BFCL task format, atomically
     * (temp file + rename): `<sink>/<campaign>/pool-v<version>.jsonl` and `current.jsonl`.
     * Writing the same version twice gives the same file.
     */
    async deliverPoolJsonl(input: {
      campaignId: string;
      version: number;
    }): Promise<{ file: string; tasks: number }> {
      const { rows } = await deps.pool.query<{ task: unknown }>(
        'select task from pool_members where campaign_id = $1 and active order by task_id',
        [input.campaignId],
      );
      const dir = path.join(deps.sinkDir, input.campaignId);
      await mkdir(dir, { recursive: true });
      const body = rows
        .map((r) => JSON.stringify(typeof r.task === 'string' ? JSON.parse(r.task) : r.task))
        .join('\n');
      const file = path.join(dir, `pool-v${input.version}.jsonl`);
      for (const target of [file, path.join(dir, 'current.jsonl')]) {
        const tmp = `${target}.${process.pid}.${Date.now()}.tmp`;
        await writeFile(tmp, rows.length ? `${body}\n` : '');
        await rename(tmp, target);
      }
      return { file, tasks: rows.length };
    },
  };
}

export type CampaignActivities = ReturnType<typeof createCampaignActivities>;
