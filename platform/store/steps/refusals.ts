// The last refusal of a step's closing batch (a 422: a task not in the pool, a reward out of
// range, ...). Such a step never closes by itself, and the trainer's reporter moves the report
// aside and goes on; the row lets rods say why the step is missing (platform/store/steps/
// missing-step.ts) and why a checkpoint waits for it. A campaign keeps the newest MAX_REFUSALS.
import type { Queryable } from '../events/event-store.js';

export const MAX_REFUSALS = 100;

export interface StepRefusal {
  step: number;
  batchId: string | null;
  /** The problem type's slug (validation, unknown-tasks, ...). */
  problem: string;
  detail: string;
  refusedAt: string;
  refusals: number;
}

/** Notes a refused closing batch of a step not closed (a no-op for a closed one); the caller checks the campaign exists. */
export async function noteStepRefusal(
  db: Queryable,
  campaignId: string,
  r: { step: number; batchId: string | null; problem: string; detail: string },
): Promise<void> {
  await db.query(
    `with upsert as (
       insert into step_refusals (campaign_id, step, batch_id, problem, detail)
       select $1, $2, $3, $4, left($5, 2000)
        where not exists (select 1 from steps where campaign_id = $1 and step = $2 and closed_at is not null)
       on conflict (campaign_id, step) do update
         set batch_id = excluded.batch_id, problem = excluded.problem, detail = excluded.detail,
             refused_at = now(), refusals = step_refusals.refusals + 1)
     delete from step_refusals
      where campaign_id = $1 and step in (
        select step from step_refusals where campaign_id = $1 order by refused_at desc offset $6)`,
    [campaignId, r.step, r.batchId, r.problem, r.detail, MAX_REFUSALS - 1],
  );
}

/** The step's last refusal, or null. */
export async function stepRefusal(
  db: Queryable,
  campaignId: string,
  step: number,
): Promise<StepRefusal | null> {
  const { rows } = await db.query<StepRefusal>(
    `select step::float8 as step, batch_id as "batchId", problem, detail,
            to_char(refused_at at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"') as "refusedAt",
            refusals::float8 as refusals
       from step_refusals where campaign_id = $1 and step = $2`,
    [campaignId, step],
  );
  return rows[0] ?? null;
}

/** "refused at <time> (<problem>): <detail>" */
export const describeRefusal = (r: StepRefusal): string =>
  `its closing batch${r.batchId ? ` ${r.batchId}` : ''} was refused at ${r.refusedAt} (${r.problem}${r.refusals > 1 ? `, ${r.refusals} times` : ''}): ${r.detail}`;
