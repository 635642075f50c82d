// The pool projection: pool_members / pool_versions / candidates from the curriculum events, each
// seed's run of rejected children, and the synthesis funnel's counts (funnel.ts).
// The same function runs live (in the transaction that appends the events) and in replay
// (into another schema), so both give the same rows.
import type pg from 'pg';
import { deliveredId } from '../../../domain/delivered-task.js';
import type {
  CandidateRejected,
  CandidateValidated,
  PoolPruned,
  TaskInjected,
  TaskRetired,
  TaskSeeded,
} from '../../../schemas/types.generated.js';
import { reconfigurationPoint, setCampaignConfig, setCampaignStatus } from '../campaigns.js';
import { inTransaction } from '../db.js';
import { append, type NewEvent } from '../events/event-store.js';
import { recordFunnelEvent } from './funnel.js';
import { recordOpenSynthesis } from './open-syntheses.js';
import { recordSeedOutcome } from './rejection-runs.js';

export const POOL_EVENT_TYPES = [
  'CampaignPaused',
  'CampaignResumed',
  'CampaignStopped',
  'CampaignReconfigured',
  'TaskSeeded',
  'TaskInjected',
  'TaskRetired',
  'PoolPruned',
  'CandidateValidated',
  'CandidateRejected',
  // the synthesis funnel's only
  'SeedSelected',
  'SynthesisStarted',
  'StageCompleted',
  'StageFailed',
] as const;

async function bumpVersion(
  c: pg.PoolClient,
  campaignId: string,
  version: number,
  step: number,
): Promise<void> {
  await c.query(
    `insert into pool_versions (campaign_id, version, step) values ($1, $2, $3)
     on conflict (campaign_id) do update set version = greatest(pool_versions.version, excluded.version),
       step = greatest(pool_versions.step, excluded.step), updated_at = now()`,
    [campaignId, version, step],
  );
}

/** A candidate row, once (a replayed event changes nothing). */
async function insertCandidate(
  c: pg.ClientBase,
  status: 'validated' | 'rejected',
  p: { campaignId: string; candidateId?: string | null; synthesisId: string; seedTaskId: string },
  hash: string,
  candidate: unknown,
  lineage: unknown,
): Promise<void> {
  await c.query(
    `insert into candidates (campaign_id, candidate_hash, candidate_id, synthesis_id, seed_task_id, status, candidate, lineage)
     values ($1, $2, $3, $4, $5, $6, $7, $8) on conflict do nothing`,
    [
      p.campaignId,
      hash,
      p.candidateId,
      p.synthesisId,
      p.seedTaskId,
      status,
      candidate,
      JSON.stringify(lineage),
    ],
  );
}

/**
 * The root seed and depth of an injected task: as the decider assigned them (domain/lineage.ts),
 * carried in the event's metadata. A TaskInjected recorded before the depth was carried is read
 * as it was projected then: root and depth follow its first parent's row.
 */
async function injectedLineage(
  c: pg.ClientBase,
  p: TaskInjected,
  metadata: Record<string, unknown>,
): Promise<{ root: string; depth: number }> {
  if (typeof metadata.rootSeed === 'string' && typeof metadata.depth === 'number')
    return { root: metadata.rootSeed, depth: metadata.depth };
  const parent = await c.query<{ root_seed: string; depth: number }>(
    'select root_seed, depth from pool_members where campaign_id = $1 and task_id = $2',
    [p.campaignId, p.parents[0] ?? ''],
  );
  return {
    root: parent.rows[0]?.root_seed ?? (metadata.rootSeed as string | undefined) ?? p.parents[0] ?? p.taskId,
    depth: (parent.rows[0]?.depth ?? 0) + 1,
  };
}

/** Applies one event to the pool tables (unknown types are ignored). */
export async function applyPoolEvent(
  c: pg.PoolClient,
  type: string,
  payload: unknown,
  metadata: Record<string, unknown> = {},
): Promise<void> {
  await recordFunnelEvent(c, type, payload);
  await recordOpenSynthesis(c, type, payload);
  switch (type) {
    case 'TaskSeeded': {
      const p = payload as TaskSeeded;
      await c.query(
        `insert into pool_members (campaign_id, task_id, origin, category, task, task_hash, root_seed, depth,
            added_step, added_version, bfcl_id)
         values ($1, $2, 'seed', $3, $4, $5, $2, 0, 0, $6, $7) on conflict do nothing`,
        [
          p.campaignId,
          p.taskId,
          p.category,
          p.task,
          p.taskHash,
          p.poolVersion,
          deliveredId(p.taskId, p.category, p.task),
        ],
      );
      await bumpVersion(c, p.campaignId, p.poolVersion, 0);
      return;
    }
    case 'TaskInjected': {
      const p = payload as TaskInjected;
      const { root, depth } = await injectedLineage(c, p, metadata);
      await c.query(
        `insert into pool_members (campaign_id, task_id, origin, category, task, task_hash, parents, root_seed, depth,
            added_step, added_version, bfcl_id)
         values ($1, $2, 'generated', $3, $4, $5, $6, $7, $8, $9, $10, $11) on conflict do nothing`,
        [
          p.campaignId,
          p.taskId,
          p.category,
          p.task,
          p.taskHash,
          p.parents,
          root,
          depth,
          p.step,
          p.poolVersion,
          deliveredId(p.taskId, p.category, p.task),
        ],
      );
      await c.query(
        `update candidates set status = 'injected' where campaign_id = $1 and candidate_id = $2`,
        [p.campaignId, p.candidateId],
      );
      await bumpVersion(c, p.campaignId, p.poolVersion, p.step);
      return;
    }
    case 'TaskRetired': {
      const p = payload as TaskRetired;
      await c.query(
        `update pool_members set active = false, removed_step = $3, removed_version = $4, removed_rule = $5
          where campaign_id = $1 and task_id = $2 and active`,
        [p.campaignId, p.taskId, p.step, p.poolVersion, p.rule],
      );
      await bumpVersion(c, p.campaignId, p.poolVersion, p.step);
      return;
    }
    case 'PoolPruned': {
      const p = payload as PoolPruned;
      await c.query(
        `update pool_members set active = false, removed_step = $3, removed_version = $4, removed_rule = 'pruned'
          where campaign_id = $1 and task_id = any($2::text[]) and active`,
        [p.campaignId, p.pruned.map((x) => x.taskId), p.step, p.poolVersion],
      );
      await bumpVersion(c, p.campaignId, p.poolVersion, p.step);
      return;
    }
    case 'CandidateValidated': {
      const p = payload as CandidateValidated;
      await insertCandidate(c, 'validated', p, p.candidateHash, p.candidate, metadata.lineage ?? {});
      await recordSeedOutcome(c, p.campaignId, p.seedTaskId, { rejected: false });
      return;
    }
    case 'CandidateRejected': {
      const p = payload as CandidateRejected;
      await recordSeedOutcome(c, p.campaignId, p.seedTaskId, { rejected: true, reason: p.reasonCode });
      // A rejection before the candidate existed (no id, no hash) leaves no row.
      if (p.candidateId && typeof metadata.candidateHash === 'string')
        await insertCandidate(
          c,
          'rejected',
          p,
          metadata.candidateHash,
          JSON.stringify(metadata.candidate ?? null),
          {},
        );
      return;
    }
    case 'CampaignPaused':
    case 'CampaignResumed':
    case 'CampaignStopped': {
      const p = payload as { campaignId: string };
      const status =
        type === 'CampaignPaused' ? 'paused' : type === 'CampaignResumed' ? 'running' : 'stopped';
      await setCampaignStatus(c, p.campaignId, status);
      return;
    }
    case 'CampaignReconfigured': {
      // Version and first step come from the metadata recordEventsIn wrote (replay reads the same);
      // an event recorded before config versions existed counts as the next version from step 0.
      const p = payload as { campaignId: string; config: string };
      await setCampaignConfig(
        c,
        p.campaignId,
        p.config,
        typeof metadata.configVersion === 'number' ? metadata.configVersion : undefined,
        typeof metadata.fromStep === 'number' ? metadata.fromStep : 0,
      );
      return;
    }
    default:
      return;
  }
}

/** Appends events to a stream and projects them inside the caller's transaction. */
export async function recordEventsIn(
  c: pg.PoolClient,
  streamId: string,
  events: NewEvent[],
): Promise<{ appended: boolean; positions: number[] }> {
  if (events.length === 0) return { appended: false, positions: [] };
  // A reconfiguration records the version it creates and the step it applies from (decided under
  // the campaign's config lock, before the append: platform/store/campaigns.ts).
  const stamped: NewEvent[] = [];
  for (const e of events) {
    if (e.type !== 'CampaignReconfigured') {
      stamped.push(e);
      continue;
    }
    const at = await reconfigurationPoint(c, (e.payload as { campaignId: string }).campaignId);
    stamped.push({ ...e, metadata: { ...e.metadata, ...at } });
  }
  const r = await append(c, streamId, 'any', stamped);
  if (r.appended) {
    for (const e of stamped)
      await applyPoolEvent(c, e.type, e.payload, (e.metadata ?? {}) as Record<string, unknown>);
  }
  return { appended: r.appended, positions: r.positions };
}

/**
 * Appends events to a stream and projects them, in one transaction. Idempotent: a batch whose
 * event ids are already stored (an activity retried after it committed) changes nothing.
 */
export async function recordEvents(
  pool: pg.Pool,
  streamId: string,
  events: NewEvent[],
): Promise<{ appended: boolean; positions: number[] }> {
  if (events.length === 0) return { appended: false, positions: [] };
  return inTransaction(pool, (c) => recordEventsIn(c, streamId, events));
}
