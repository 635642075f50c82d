// Each step's plan (campaign_plans): the pool state after the step's decisions and the plan the
// campaign workflow got back, written by planning in the transaction that records the decisions.
// A retried planning activity finds its plan here and returns it instead of deciding again.
import type pg from 'pg';
import { countsOf } from './db.js';
import type { Queryable } from './events/event-store.js';

/** The plan recorded for the step, if any (step 0: the seeding's result). */
export async function recordedPlan<T>(
  db: Queryable,
  campaignId: string,
  step: number,
): Promise<T | undefined> {
  const r = await db.query<{ result: T }>(
    'select result from campaign_plans where campaign_id = $1 and step = $2',
    [campaignId, step],
  );
  return r.rows[0]?.result;
}

/** The pool state recorded with the step's plan, if any. */
export async function planState<S>(db: Queryable, campaignId: string, step: number): Promise<S | undefined> {
  const r = await db.query<{ state: S }>(
    'select state from campaign_plans where campaign_id = $1 and step = $2',
    [campaignId, step],
  );
  return r.rows[0]?.state;
}

/** The newest plan's step and pool state. */
export async function latestPlanState<S>(
  db: Queryable,
  campaignId: string,
): Promise<{ step: number; state: S } | undefined> {
  const r = await db.query<{ step: string; state: S }>(
    'select step, state from campaign_plans where campaign_id = $1 order by step desc limit 1',
    [campaignId],
  );
  const row = r.rows[0];
  return row && { step: Number(row.step), state: row.state };
}

/** The highest step the campaign planned (0: none, or only the seeding). */
export async function lastPlannedStep(db: Queryable, campaignId: string): Promise<number> {
  const r = await db.query<{ step: string | null }>(
    'select max(step) as step from campaign_plans where campaign_id = $1',
    [campaignId],
  );
  return Number(r.rows[0]?.step ?? 0);
}

/** Every plan of the campaign, in step order. */
export async function allPlans<S, R>(
  db: Queryable,
  campaignId: string,
): Promise<{ step: number; state: S; result: R }[]> {
  const r = await db.query<{ step: string; state: S; result: R }>(
    'select step, state, result from campaign_plans where campaign_id = $1 order by step',
    [campaignId],
  );
  return r.rows.map((x) => ({ step: Number(x.step), state: x.state, result: x.result }));
}

/** Records the step's plan with the pool state after it. */
export async function insertPlan(
  db: Queryable,
  campaignId: string,
  step: number,
  state: unknown,
  result: unknown,
): Promise<void> {
  await db.query('insert into campaign_plans (campaign_id, step, state, result) values ($1, $2, $3, $4)', [
    campaignId,
    step,
    JSON.stringify(state),
    JSON.stringify(result),
  ]);
}

/** The last planned step of each campaign named (a gauge). */
export const lastPlannedSteps = (db: pg.Pool, campaignIds: readonly string[]) =>
  countsOf(
    db,
    'select campaign_id, null as k, max(step) as n from campaign_plans where campaign_id = any($1) group by 1',
    campaignIds,
  );

/** Each plan's result without its lists (pool version, sizes), in step order. */
export async function planSummaries(
  db: Queryable,
  campaignId: string,
): Promise<{ step: number; result: Record<string, unknown> }[]> {
  const r = await db.query<{ step: string; result: Record<string, unknown> }>(
    `select step, result - 'selected' - 'inputs' - 'injected' - 'retired' - 'pruned' as result
       from campaign_plans where campaign_id = $1 order by step`,
    [campaignId],
  );
  return r.rows.map((x) => ({ step: Number(x.step), result: x.result }));
}
