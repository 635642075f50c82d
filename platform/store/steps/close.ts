// The reads and writes that close a step (the rule is stages/aggregator/steps.ts): which steps are open,
// what was declared and counted for one, whether an earlier one is on its way, and marking it
// closed. Closing and skipping a step hold the same per-campaign lock.
import type pg from 'pg';
import { emptyTally, type StepTally } from '../../../domain/step-tally.js';
import { lockForTransaction } from '../locks.js';

/** Takes the campaign's step lock until the transaction ends (one closer or skipper at a time). */
export async function lockCampaignSteps(client: pg.PoolClient, campaignId: string): Promise<void> {
  await lockForTransaction(client, `rods-steps:${campaignId}`);
}

/** Campaigns with a step not closed yet. */
export async function campaignsWithOpenSteps(db: pg.Pool): Promise<string[]> {
  const { rows } = await db.query<{ campaign_id: string }>(
    'select distinct campaign_id from steps where closed_at is null',
  );
  return rows.map((r) => r.campaign_id);
}

/** The campaign's steps not closed yet, in order. */
export async function openSteps(db: pg.Pool, campaignId: string): Promise<number[]> {
  const { rows } = await db.query<{ step: number }>(
    'select step from steps where campaign_id = $1 and closed_at is null order by step',
    [campaignId],
  );
  return rows.map((r) => Number(r.step));
}

/** The step's row: the groups its StepClosed declared (null until then) and whether it closed. */
export async function stepRow(
  db: pg.PoolClient,
  campaignId: string,
  step: number,
): Promise<{ declared: number | null; closed: boolean } | undefined> {
  const { rows } = await db.query<{ declared_groups: number | null; closed_at: Date | null }>(
    'select declared_groups, closed_at from steps where campaign_id = $1 and step = $2',
    [campaignId, step],
  );
  const r = rows[0];
  return (
    r && {
      declared: r.declared_groups === null ? null : Number(r.declared_groups),
      closed: r.closed_at !== null,
    }
  );
}

interface ProgressRow {
  applied: number;
  rejected: number;
  hard_tasks: number;
  hard_var_sum: number;
  boundary_tasks: number;
  boundary_var_sum: number;
  mastered_tasks: number;
  mastered_var_sum: number;
}

/** What every partition counted for the step: groups rejected, and the applied ones by band. */
export async function stepCounts(
  db: pg.PoolClient,
  campaignId: string,
  step: number,
): Promise<{ rejected: number; tally: StepTally }> {
  const { rows } = await db.query<ProgressRow>(
    `select coalesce(sum(groups_applied), 0)::bigint as applied, coalesce(sum(groups_rejected), 0)::bigint as rejected,
            coalesce(sum(hard_tasks), 0)::bigint as hard_tasks, coalesce(sum(hard_var_sum), 0) as hard_var_sum,
            coalesce(sum(boundary_tasks), 0)::bigint as boundary_tasks, coalesce(sum(boundary_var_sum), 0) as boundary_var_sum,
            coalesce(sum(mastered_tasks), 0)::bigint as mastered_tasks, coalesce(sum(mastered_var_sum), 0) as mastered_var_sum
       from step_progress where campaign_id = $1 and step = $2`,
    [campaignId, step],
  );
  const r = rows[0]!;
  const tally = emptyTally();
  tally.groups = r.applied;
  tally.hard = { tasks: r.hard_tasks, varianceSum: r.hard_var_sum };
  tally.boundary = { tasks: r.boundary_tasks, varianceSum: r.boundary_var_sum };
  tally.mastered = { tasks: r.mastered_tasks, varianceSum: r.mastered_var_sum };
  return { rejected: r.rejected, tally };
}

/**
 * Whether an earlier, unclosed step of the campaign has its closing batch accepted by the gateway:
 * it is on its way (its records may sit on a partition that lags), so this step waits for it.
 * An earlier step with no closing batch is a missing one (missing-step.ts) and holds nothing here.
 */
export async function earlierStepComing(
  client: pg.PoolClient,
  campaignId: string,
  step: number,
): Promise<boolean> {
  const { rows } = await client.query<{ coming: boolean }>(
    `select exists (
       select 1 from ingestion_batches b
        where b.campaign_id = $1 and b.closes and b.step < $2
          and b.step > coalesce((select max(step) from steps
                                  where campaign_id = $1 and step < $2 and closed_at is not null), -1)
          and not exists (select 1 from steps s
                           where s.campaign_id = $1 and s.step = b.step and s.closed_at is not null)
     ) as coming`,
    [campaignId, step],
  );
  return rows[0]!.coming;
}

/** Marks the step closed with its summary. */
export async function markStepClosed(
  client: pg.PoolClient,
  campaignId: string,
  step: number,
  summary: Record<string, unknown>,
): Promise<void> {
  await client.query(
    'update steps set closed_at = now(), summary = $3 where campaign_id = $1 and step = $2',
    [campaignId, step, JSON.stringify(summary)],
  );
}
