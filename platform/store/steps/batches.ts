// Accepted rollout batches not yet published to Kafka (ingestion_batches rows still 'accepted').
// A batch stays there while the gateway publishes it (milliseconds) or its ingestion workflow
// runs, and for good when neither finished (the gateway died before publishing it, or its send
// and the workflow's start both failed): the gateway's reconciler (entry/gateway/reconcile.ts) finds
// those and starts their workflows; status reporting counts them.

import type pg from 'pg';
import type { RolloutBatchBody } from '../../kafka/rollout-records.js';
import { countsOf } from '../db.js';

/**
 * The claim check the gateway stores: the batch with its groups as JSON text (`groupsJson`),
 * which PostgreSQL keeps as one string instead of parsing every reward into a jsonb number.
 * Claim checks written before carry `groups` itself.
 */
export type StoredRolloutBatch = Omit<RolloutBatchBody, 'groups'> &
  ({ groupsJson: string } | { groups: RolloutBatchBody['groups'] });

export function storedRolloutBatch(body: RolloutBatchBody, groupsJson?: string): StoredRolloutBatch {
  const { groups, ...rest } = body;
  return { ...rest, groupsJson: groupsJson ?? JSON.stringify(groups) };
}

export function readStoredRolloutBatch(stored: StoredRolloutBatch): RolloutBatchBody {
  if (!('groupsJson' in stored)) return stored;
  const { groupsJson, ...rest } = stored;
  return { ...rest, groups: JSON.parse(groupsJson) as RolloutBatchBody['groups'] };
}

/** The claim check stored under `claimId`, if any (pruned: its batch was published and its step closed long ago). */
export async function readClaimCheck(
  db: pg.Pool,
  claimId: string,
): Promise<StoredRolloutBatch | 'pruned' | undefined> {
  const { rows } = await db.query<{ body: StoredRolloutBatch | null }>(
    'select body from claim_checks where claim_id = $1',
    [claimId],
  );
  const r = rows[0];
  return r && (r.body ?? 'pruned');
}

/** The batch a claim check belongs to: its key, group count and publication. */
export async function batchOfClaim(
  db: pg.Pool,
  claimId: string,
): Promise<
  | {
      campaignId: string;
      step: number;
      batchId: string;
      groups: number;
      status: string;
      stepGroups: number | null;
    }
  | undefined
> {
  const { rows } = await db.query<{
    campaign_id: string;
    step: string;
    batch_id: string;
    groups: number;
    status: string;
    step_groups: number | null;
  }>(
    'select campaign_id, step, batch_id, groups, status, step_groups from ingestion_batches where claim_id = $1',
    [claimId],
  );
  const r = rows[0];
  return (
    r && {
      campaignId: r.campaign_id,
      step: Number(r.step),
      batchId: r.batch_id,
      groups: r.groups,
      status: r.status,
      stepGroups: r.step_groups,
    }
  );
}

/**
 * Steps whose claim checks stay after the step closed: a step's batches are emptied when the step
 * this many later closes (their rewards are on the rewards topic and counted by then).
 */
export const CLAIM_CHECK_STEPS = 100;

/**
 * Empties the claim checks of the campaign's published batches of `step` (the step the closing
 * one left CLAIM_CHECK_STEPS behind) and of the few steps before it that a skip left behind.
 */
export async function pruneClaimChecks(c: pg.ClientBase, campaignId: string, step: number): Promise<number> {
  const r = await c.query(
    `update claim_checks set body = null, pruned_at = now()
      where claim_id in (select claim_id from ingestion_batches
                          where campaign_id = $1 and step > $2 - 10 and step <= $2 and status = 'published')
        and body is not null`,
    [campaignId, step],
  );
  return r.rowCount ?? 0;
}

/** A batch's publication state: 'accepted' or 'published', with the StepClosed count it sent. */
export async function batchPublication(
  db: pg.Pool,
  b: { campaignId: string; step: number; batchId: string },
): Promise<{ status: string; stepGroups: number | null } | undefined> {
  const { rows } = await db.query<{ status: string; step_groups: number | null }>(
    'select status, step_groups from ingestion_batches where campaign_id = $1 and step = $2 and batch_id = $3',
    [b.campaignId, b.step, b.batchId],
  );
  const r = rows[0];
  return r && { status: r.status, stepGroups: r.step_groups };
}

/**
 * The groups of every batch accepted for a step. Final once its closing batch is accepted: the
 * gateway refuses any batch for the step after that.
 */
export async function stepGroupTotal(db: pg.Pool, campaignId: string, step: number): Promise<number> {
  const { rows } = await db.query<{ n: number }>(
    'select coalesce(sum(groups), 0)::int as n from ingestion_batches where campaign_id = $1 and step = $2',
    [campaignId, step],
  );
  return rows[0]!.n;
}

/**
 * Marks a batch published once its records are on the topic. `asyncCommit` (the gateway's direct
 * publish) commits without waiting for the WAL flush: losing that mark to a PostgreSQL crash only
 * makes the reconciler start the batch's ingestion workflow, which publishes it again (the
 * aggregator drops the repeated event ids) and marks it. The activity's mark is synchronous: a
 * completed workflow is never started again, so its mark must not be lost.
 */
export async function markPublished(
  db: pg.Pool,
  b: { campaignId: string; step: number; batchId: string },
  stepGroups: number | null,
  opts: { asyncCommit?: boolean } = {},
): Promise<void> {
  const params = [b.campaignId, b.step, b.batchId, stepGroups];
  const set = `set status = 'published', published_at = now(), step_groups = $4
     where campaign_id = $1 and step = $2 and batch_id = $3 and status = 'accepted'`;
  if (!opts.asyncCommit) await db.query(`update ingestion_batches ${set}`, params);
  // set_config(..., true) lasts until the end of this statement's own transaction: its commit.
  else
    await db.query(
      `with async_commit as materialized (select set_config('synchronous_commit', 'off', true) as v)
       update ingestion_batches ${set} and (select v from async_commit) = 'off'`,
      params,
    );
}

/** One accepted batch not yet published. */
export interface UnpublishedBatch {
  step: number;
  batchId: string;
  groups: number;
  /** Whether it closes its step (its StepClosed is not on the topic either). */
  closes: boolean;
  workflowId: string;
  /** When the gateway accepted it (ISO 8601). */
  acceptedAt: string;
}

export interface UnpublishedBatches {
  /** Accepted batches of the campaign not yet published. */
  count: number;
  /** Groups they hold (not yet on the rewards topic). */
  groups: number;
  /** The lowest step among them (steps close in order: the one that waits longest). */
  oldestStep: number | null;
  /** When the oldest one was accepted (ISO 8601), and its age in ms by PostgreSQL's clock. */
  oldestAcceptedAt: string | null;
  oldestAgeMs: number | null;
  /** The first `limit` of them, lowest step first. */
  batches: UnpublishedBatch[];
}

/**
 * A campaign's accepted-but-unpublished batches (for status and stall reports), optionally only
 * those accepted more than olderThanMs ago: a batch normally publishes within a second of being
 * accepted, and the reconciler publishes those older than its grace period.
 */
export async function unpublishedBatches(
  db: pg.Pool | pg.PoolClient,
  campaignId: string,
  opts: { olderThanMs?: number; limit?: number } = {},
): Promise<UnpublishedBatches> {
  const olderThanS = (opts.olderThanMs ?? 0) / 1000;
  const total = await db.query<{
    n: number;
    groups: number;
    step: number | null;
    at: Date | null;
    age_ms: number | null;
  }>(
    `select count(*)::int as n, coalesce(sum(groups), 0)::int as groups, min(step) as step,
            min(created_at) as at, (extract(epoch from now() - min(created_at)) * 1000)::float8 as age_ms
       from ingestion_batches
      where campaign_id = $1 and status = 'accepted' and created_at <= now() - make_interval(secs => $2)`,
    [campaignId, olderThanS],
  );
  const { rows } = await db.query<{
    step: number;
    batch_id: string;
    groups: number;
    closes: boolean;
    workflow_id: string;
    created_at: Date;
  }>(
    `select step, batch_id, groups, closes, workflow_id, created_at from ingestion_batches
      where campaign_id = $1 and status = 'accepted' and created_at <= now() - make_interval(secs => $2)
      order by step, created_at, batch_id limit $3`,
    [campaignId, olderThanS, opts.limit ?? 100],
  );
  const t = total.rows[0]!;
  return {
    count: t.n,
    groups: t.groups,
    oldestStep: t.step === null ? null : Number(t.step),
    oldestAcceptedAt: t.at ? t.at.toISOString() : null,
    oldestAgeMs: t.age_ms === null ? null : Math.max(0, Math.round(t.age_ms)),
    batches: rows.map((r) => ({
      step: Number(r.step),
      batchId: r.batch_id,
      groups: r.groups,
      closes: r.closes,
      workflowId: r.workflow_id,
      acceptedAt: r.created_at.toISOString(),
    })),
  };
}

/** Campaigns with batches accepted more than graceMs ago and still unpublished. */
export async function campaignsWithUnpublishedBatches(
  db: pg.Pool,
  graceMs: number,
): Promise<{ campaignId: string; count: number }[]> {
  const { rows } = await db.query<{ campaign_id: string; n: number }>(
    `select campaign_id, count(*)::int as n from ingestion_batches
      where status = 'accepted' and created_at <= now() - make_interval(secs => $1)
      group by campaign_id order by min(created_at)`,
    [graceMs / 1000],
  );
  return rows.map((r) => ({ campaignId: r.campaign_id, count: r.n }));
}

/** What the reconciler needs to start a batch's ingestion workflow. */
export interface StaleBatch {
  campaignId: string;
  step: number;
  batchId: string;
  claimId: string;
  workflowId: string;
}

/** A campaign's batches accepted more than graceMs ago and still unpublished, lowest step first. */
export async function staleUnpublishedBatches(
  db: pg.Pool,
  campaignId: string,
  graceMs: number,
  limit: number,
): Promise<StaleBatch[]> {
  const { rows } = await db.query<{ step: number; batch_id: string; claim_id: string; workflow_id: string }>(
    `select step, batch_id, claim_id, workflow_id from ingestion_batches
      where campaign_id = $1 and status = 'accepted' and created_at <= now() - make_interval(secs => $2)
      order by step, created_at limit $3`,
    [campaignId, graceMs / 1000, limit],
  );
  return rows.map((r) => ({
    campaignId,
    step: r.step,
    batchId: r.batch_id,
    claimId: r.claim_id,
    workflowId: r.workflow_id,
  }));
}

/** Accepted batches not yet published, per campaign named (a gauge). */
export const unpublishedBatchCounts = (db: pg.Pool, campaignIds: readonly string[]) =>
  countsOf(
    db,
    `select campaign_id, null as k, count(*) as n from ingestion_batches
      where campaign_id = any($1) and status = 'accepted' group by 1`,
    campaignIds,
  );

/** The ingestion workflow ids of the campaign's accepted batches. */
export async function batchWorkflowIds(db: pg.Pool, campaignId: string): Promise<string[]> {
  const { rows } = await db.query<{ workflow_id: string }>(
    'select workflow_id from ingestion_batches where campaign_id = $1',
    [campaignId],
  );
  return rows.map((r) => r.workflow_id);
}

/** The step and id of each batch the gateway accepted for the campaign. */
export async function acceptedBatches(
  db: pg.Pool,
  campaignId: string,
): Promise<{ step: number; batchId: string }[]> {
  const { rows } = await db.query<{ step: string; batch_id: string }>(
    'select step, batch_id from ingestion_batches where campaign_id = $1',
    [campaignId],
  );
  return rows.map((r) => ({ step: Number(r.step), batchId: r.batch_id }));
}
