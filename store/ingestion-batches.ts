// Accepted rollout batches not yet published to Kafka (ingestion_batches rows still 'accepted').
// A batch stays there while the gateway publishes it (milliseconds) or its ingestion workflow
// runs, and for good when neither finished (the gateway died before publishing it, or its send
// and the workflow's start both failed): the gateway's reconciler (gateway/reconcile.ts) finds
// those and starts their workflows; status reporting counts them.
import type pg from 'pg';

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
