// What a real trainer's run against a campaign must leave in PostgreSQL, checked from the claim
// checks (what the gateway accepted), the steps table and the events: every step closed once and
// in order, every accepted group counted once, injected tasks drawn after their injection.
import { expect } from 'vitest';
import type { Pool } from '../../platform/store/db.js';
import { waitUntil } from './wait.js';

/**
 * A small campaign of a real trainer's test: 12 seeds, groups of 4, two seeds selected a step
 * from their first group, injection every step: tasks are injected within seconds of training.
 */
export const LIVE_CAMPAIGN = {
  rolloutsPerTask: 4,
  seeds: { perCategory: 3 },
  pool: { injectionCadence: 'steps:1' },
  selection: {
    budgetPerStep: 2,
    perCategoryQuota: { base: 1, miss_func: 1, miss_param: 0, long_context: 0 },
    cooldownSteps: 2,
    minGroups: 1,
    maxConcurrentSyntheses: 2,
  },
  generator: { endpoint: 'default', model: 'rods-standin-generator', judgeModel: 'rods-standin-generator' },
};

/** Every reward group the gateway accepted for the campaign, by step and task (from the claim checks). */
export async function acceptedGroups(db: Pool, campaign: string) {
  const { rows } = await db.query<{ step: number; batch_id: string; task_id: string; n: number }>(
    `select b.step::int as step, b.batch_id, g->>'taskId' as task_id, jsonb_array_length(g->'rewards') as n
       from ingestion_batches b join claim_checks c using (claim_id),
            jsonb_array_elements((c.body->>'groupsJson')::jsonb) g
      where b.campaign_id = $1 order by b.step`,
    [campaign],
  );
  return rows;
}

/** Steps 1..n closed by the aggregator, in order, each once. */
export async function expectStepsClosedInOrder(db: Pool, campaign: string, n: number) {
  await waitUntil(
    async () => {
      const { rows } = await db.query<{ n: number }>(
        'select count(*)::int as n from steps where campaign_id = $1 and closed_at is not null',
        [campaign],
      );
      return rows[0]!.n >= n;
    },
    { what: `steps 1..${n} of ${campaign} to close`, timeoutMs: 180_000, intervalMs: 500 },
  );
  const { rows } = await db.query<{ step: number }>(
    'select step::int as step from steps where campaign_id = $1 order by step',
    [campaign],
  );
  expect(rows.map((r) => r.step)).toEqual(Array.from({ length: n }, (_, i) => i + 1));
  // One StepAggregated per step (closed once), appended in step order: the store's order, not
  // closed_at (PostgreSQL's now() is each transaction's start, and closers wait on one lock).
  const agg = await db.query<{ step: number }>(
    `select (payload->>'step')::int as step from events
      where type = 'StepAggregated' and payload->>'campaignId' = $1 order by transaction_id, position`,
    [campaign],
  );
  expect(agg.rows.map((r) => r.step)).toEqual(rows.map((r) => r.step));
}

/** What the statistics counted equals what was accepted: every accepted group once, no other. */
export async function expectCountedOnce(db: Pool, campaign: string) {
  const accepted = await acceptedGroups(db, campaign);
  const perTask = new Map<string, { groups: number; rollouts: number }>();
  for (const g of accepted) {
    const t = perTask.get(g.task_id) ?? { groups: 0, rollouts: 0 };
    t.groups++;
    t.rollouts += g.n;
    perTask.set(g.task_id, t);
  }
  const { rows } = await db.query<{ task_id: string; groups: number; rollouts: number }>(
    'select task_id, groups::int as groups, rollouts::int as rollouts from task_stats where campaign_id = $1',
    [campaign],
  );
  expect(
    Object.fromEntries(rows.map((r) => [r.task_id, { groups: r.groups, rollouts: r.rollouts }])),
  ).toEqual(Object.fromEntries(perTask));
  return accepted;
}

/** Tasks injected, at which step, and the first step after it in which TRL was rewarded on each. */
export async function injections(db: Pool, campaign: string) {
  const { rows } = await db.query<{ task_id: string; step: number; first: number | null }>(
    `with inj as (select payload->>'taskId' as task_id, (payload->>'step')::int as step from events
                   where type = 'TaskInjected' and payload->>'campaignId' = $1),
          rew as (select b.step::int as step, g->>'taskId' as task_id
                    from ingestion_batches b join claim_checks c using (claim_id),
                         jsonb_array_elements((c.body->>'groupsJson')::jsonb) g
                   where b.campaign_id = $1)
     select inj.task_id, inj.step, min(rew.step) as first
       from inj left join rew on rew.task_id = inj.task_id and rew.step > inj.step
      group by 1, 2 order by 2, 1`,
    [campaign],
  );
  return rows;
}
