// What a batch adds to its steps: per campaign and step, the groups applied (tallied by the band
// their task ended in) and rejected, written to step_progress as this partition's share, and the
// groups a StepClosed declared, written to steps. Closing a step reads these (close.ts).
import type pg from 'pg';
import type { Band } from '../../../domain/band.js';
import type { StepTally } from '../../../domain/step-tally.js';

export interface StepCount {
  campaignId: string;
  step: number;
  tally: StepTally;
  rejected: number;
}

/** A StepClosed's declaration: the groups the step has in all. */
export interface StepDeclaration {
  campaignId: string;
  step: number;
  groupCount: number;
}

/** Adds the batch's counts to this partition's step_progress rows and makes sure each step has a steps row. */
export async function recordStepProgress(
  client: pg.PoolClient,
  topic: string,
  partition: number,
  counts: readonly StepCount[],
): Promise<void> {
  if (counts.length === 0) return;
  // One statement for all steps the batch touched, in key order (no lock-order inversions).
  const ts = [...counts].sort((a, b) => a.campaignId.localeCompare(b.campaignId) || a.step - b.step);
  const band = (b: Band, f: 'tasks' | 'varianceSum') => ts.map((t) => t.tally[b][f]);
  await client.query(
    `insert into step_progress (campaign_id, step, topic, partition, groups_applied, groups_rejected,
        hard_tasks, hard_var_sum, boundary_tasks, boundary_var_sum, mastered_tasks, mastered_var_sum)
     select c, st, $3, $4, ga, gr, ht, hv, bt, bv, mt, mv
       from unnest($1::text[], $2::bigint[], $5::bigint[], $6::bigint[], $7::bigint[], $8::float8[],
                   $9::bigint[], $10::float8[], $11::bigint[], $12::float8[])
         as u(c, st, ga, gr, ht, hv, bt, bv, mt, mv)
     on conflict (campaign_id, step, topic, partition) do update set
       groups_applied = step_progress.groups_applied + excluded.groups_applied,
       groups_rejected = step_progress.groups_rejected + excluded.groups_rejected,
       hard_tasks = step_progress.hard_tasks + excluded.hard_tasks,
       hard_var_sum = step_progress.hard_var_sum + excluded.hard_var_sum,
       boundary_tasks = step_progress.boundary_tasks + excluded.boundary_tasks,
       boundary_var_sum = step_progress.boundary_var_sum + excluded.boundary_var_sum,
       mastered_tasks = step_progress.mastered_tasks + excluded.mastered_tasks,
       mastered_var_sum = step_progress.mastered_var_sum + excluded.mastered_var_sum`,
    [
      ts.map((t) => t.campaignId),
      ts.map((t) => t.step),
      topic,
      partition,
      ts.map((t) => t.tally.groups),
      ts.map((t) => t.rejected),
      band('hard', 'tasks'),
      band('hard', 'varianceSum'),
      band('boundary', 'tasks'),
      band('boundary', 'varianceSum'),
      band('mastered', 'tasks'),
      band('mastered', 'varianceSum'),
    ],
  );
  await client.query(
    `insert into steps (campaign_id, step) select * from unnest($1::text[], $2::bigint[])
     on conflict do nothing`,
    [ts.map((t) => t.campaignId), ts.map((t) => t.step)],
  );
}

/** Records the group counts StepClosed declared (closings of registered campaigns only). */
export async function declareSteps(
  client: pg.PoolClient,
  closings: readonly StepDeclaration[],
): Promise<void> {
  for (const c of closings) {
    await client.query(
      `insert into steps (campaign_id, step, declared_groups) values ($1, $2, $3)
       on conflict (campaign_id, step) do update set declared_groups = excluded.declared_groups`,
      [c.campaignId, c.step, c.groupCount],
    );
  }
}

/** The highest step any reward group of the campaign was counted for (null: none yet). */
export async function highestCountedStep(db: pg.PoolClient, campaignId: string): Promise<number | null> {
  const { rows } = await db.query<{ step: string | null }>(
    'select max(step) as step from step_progress where campaign_id = $1',
    [campaignId],
  );
  return rows[0]?.step == null ? null : Number(rows[0].step);
}
