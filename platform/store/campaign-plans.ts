// Each step's plan (campaign_plans): the pool state after the step's decisions and the plan the
// campaign workflow got back, written by planning in the transaction that records the decisions.
// A retried planning activity finds its plan here and returns it instead of deciding again.
// A plan keeps its state only at step 0, every PLAN_STATE_EVERY steps and while it is the newest
// (migration 0019): a past step's pool is the nearest kept state and the plans after it, so the
// table grows by a plan's result a step, not by the whole pool.
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

/** Steps whose plan keeps its pool state for good (and step 0, and the newest plan). */
export const PLAN_STATE_EVERY = 100;

/**
 * The pool after the step's plan: its version and active members' ids. Read from the nearest kept
 * state at or before the step and the membership changes the plans after it recorded (at most
 * PLAN_STATE_EVERY of them). Undefined when the step was not planned.
 */
export async function poolAtStep(
  db: Queryable,
  campaignId: string,
  step: number,
): Promise<{ version: number; members: string[] } | undefined> {
  const kept = await db.query<{ step: string; version: number; members: string[] }>(
    `select step, (state->>'version')::int as version,
            array(select m->>'taskId' from jsonb_array_elements(state->'members') m) as members
       from campaign_plans where campaign_id = $1 and step <= $2 and state is not null
      order by step desc limit 1`,
    [campaignId, step],
  );
  const base = kept.rows[0];
  if (!base) return undefined;
  const after = await db.query<{
    step: string;
    version: number;
    injected: string[];
    removed: string[];
  }>(
    `select step, (result->>'poolVersion')::int as version,
            array(select jsonb_array_elements_text(coalesce(result->'injected', '[]'))) as injected,
            array(select r->>'taskId' from jsonb_array_elements(coalesce(result->'retired', '[]')) r
                  union all select jsonb_array_elements_text(coalesce(result->'pruned', '[]'))) as removed
       from campaign_plans where campaign_id = $1 and step > $2 and step <= $3 order by step`,
    [campaignId, base.step, step],
  );
  if (Number(base.step) !== step && Number(after.rows.at(-1)?.step) !== step) return undefined;
  const members = new Set(base.members);
  let version = base.version;
  // A step injects before it prunes (a task injected and pruned at once ends out); a retired task is never injected.
  for (const p of after.rows) {
    for (const t of p.injected) members.add(t);
    for (const t of p.removed) members.delete(t);
    version = p.version;
  }
  return { version, members: [...members].sort() };
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

/** The state seeding left (step 0), if the campaign was seeded. */
export async function seededState<S>(db: Queryable, campaignId: string): Promise<S | undefined> {
  const r = await db.query<{ state: S }>(
    'select state from campaign_plans where campaign_id = $1 and step = 0',
    [campaignId],
  );
  return r.rows[0]?.state;
}

/** The plans' results after step 0, in step order, a page at a time (a what-if re-decides them one by one). */
export async function* planResults<R>(
  db: Queryable,
  campaignId: string,
  pageSize = 500,
): AsyncGenerator<{ step: number; result: R }> {
  for (let after = 0; ; ) {
    const r = await db.query<{ step: string; result: R }>(
      'select step, result from campaign_plans where campaign_id = $1 and step > $2 order by step limit $3',
      [campaignId, after, pageSize],
    );
    for (const x of r.rows) yield { step: Number(x.step), result: x.result };
    if (r.rows.length < pageSize) return;
    after = Number(r.rows.at(-1)!.step);
  }
}

/**
 * Records the step's plan with the pool state after it, and thins the plan before it: its state
 * goes unless its step is 0 or a multiple of PLAN_STATE_EVERY, and its selected seeds' task
 * records go (a retried planning activity reads only the newest plan).
 */
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
  await db.query(
    `update campaign_plans
        set state = case when step = 0 or step % $3 = 0 then state end,
            result = case when jsonb_typeof(result->'selected') = 'array'
                          then jsonb_set(result, '{selected}',
                                 coalesce((select jsonb_agg(x - 'task') from jsonb_array_elements(result->'selected') x), '[]'))
                          else result end
      where campaign_id = $1
        and step = (select max(step) from campaign_plans where campaign_id = $1 and step < $2)`,
    [campaignId, step, PLAN_STATE_EVERY],
  );
}

/** The last planned step of each campaign named (a gauge). */
export const lastPlannedSteps = (db: pg.Pool, campaignIds: readonly string[]) =>
  countsOf(
    db,
    'select campaign_id, null as k, max(step) as n from campaign_plans where campaign_id = any($1) group by 1',
    campaignIds,
  );

/** Each plan's result without its lists (pool version, sizes), in step order; of these steps only, when given. */
export async function planSummaries(
  db: Queryable,
  campaignId: string,
  only?: readonly number[],
): Promise<{ step: number; result: Record<string, unknown> }[]> {
  const r = await db.query<{ step: string; result: Record<string, unknown> }>(
    `select step, result - 'selected' - 'inputs' - 'injected' - 'retired' - 'pruned' as result
       from campaign_plans where campaign_id = $1 and ($2::bigint[] is null or step = any($2::bigint[]))
      order by step`,
    [campaignId, only ?? null],
  );
  return r.rows.map((x) => ({ step: Number(x.step), result: x.result }));
}
