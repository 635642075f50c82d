// Each seed's run of rejected children (migrations/0014_seed_rejection_runs.sql): the pool
// projection records every candidate outcome here in the transaction that appends it, and the
// planner reads one row per seed instead of the campaign's outcome events.
import type pg from 'pg';
import type { RejectionRun } from '../../../domain/step-events.js';

/** Reason codes kept per seed (a streak longer than this sees only the newest reasons). */
export const KEPT_REASONS = 64;

/** A candidate outcome of `seedTaskId`: a validation ends its run, a rejection lengthens it. */
export async function recordSeedOutcome(
  c: pg.ClientBase,
  campaignId: string,
  seedTaskId: string,
  outcome: { rejected: false } | { rejected: true; reason: string | null },
): Promise<void> {
  if (!outcome.rejected) {
    await c.query(
      `insert into seed_rejection_runs (campaign_id, seed_task_id, run, reasons, has_validated)
       values ($1, $2, 0, '{}', true)
       on conflict (campaign_id, seed_task_id) do update set run = 0, reasons = '{}', has_validated = true`,
      [campaignId, seedTaskId],
    );
    return;
  }
  await c.query(
    `insert into seed_rejection_runs as r (campaign_id, seed_task_id, run, reasons)
     values ($1, $2, 1, array[$3::text])
     on conflict (campaign_id, seed_task_id) do update
       set run = r.run + 1, reasons = (array[$3::text] || r.reasons)[1:${KEPT_REASONS}]`,
    [campaignId, seedTaskId, outcome.reason ?? 'rejected'],
  );
}

/** The seeds of a campaign with a run of rejected children. */
export async function seedRejectionRuns(
  db: pg.ClientBase,
  campaignId: string,
  /** Only these seeds (the pool's members: a retired task keeps its row); all when absent. */
  among?: readonly string[],
): Promise<RejectionRun[]> {
  const { rows } = await db.query<RejectionRun>(
    `select seed_task_id as "seedTaskId", run::int as run, reasons, has_validated as "hasValidated"
       from seed_rejection_runs
      where campaign_id = $1 and run > 0 and ($2::text[] is null or seed_task_id = any($2::text[]))`,
    [campaignId, among ?? null],
  );
  return rows;
}
