// Every query of the paths a long campaign repeats (a planning step, a status call, a dashboard
// poll, a lineage lookup, a replay resume, a checkpoint's manifest) reaches `events` through an index: each query those
// paths send is captured from the real run and EXPLAINed with sequential scans priced out
// (enable_seqscan off), so a query that can only scan the whole event log still shows a Seq
// Scan on events and fails here. A sequential scan of a small table is fine; of the log, it is
// a cost that grows with every reward group of the campaign's history.
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { campaignsOfTask, loadLineageIndex } from '../analysis/lineage/store.js';
import { computeManifest, verifyManifests } from '../analysis/manifest/manifest.js';
import { replayCampaign } from '../analysis/replay/replay.js';
import { campaignStatus } from '../analysis/status/campaign-status.js';
import { dashboardSeries, rewardHistory } from '../analysis/status/dashboard.js';
import type { LoopHarness } from '../dev/harness/loop.js';
import { standinCampaign } from '../dev/harness/standin.js';
import { createPool } from '../platform/store/db.js';
import { standinCampaigns } from './support/standin-campaign.js';

interface Captured {
  text: string;
  values: unknown[];
}

/** The statements every pg client of this process sends while `fn` runs. */
async function capture(fn: () => Promise<unknown>): Promise<Captured[]> {
  const seen: Captured[] = [];
  const original = pg.Client.prototype.query;
  pg.Client.prototype.query = function (this: pg.Client, ...args: unknown[]) {
    const [q, v] = args as [string | { text?: string; values?: unknown[] }, unknown];
    const text = typeof q === 'string' ? q : q?.text;
    const values = (Array.isArray(v) ? v : typeof q === 'object' ? q?.values : undefined) ?? [];
    if (typeof text === 'string') seen.push({ text, values });
    return (original as (...a: unknown[]) => unknown).apply(this, args);
  } as typeof original;
  try {
    await fn();
  } finally {
    pg.Client.prototype.query = original;
  }
  return seen;
}

/** The query a statement plans (COPY's inner query), or null for one that has no plan to read. */
function plannable(text: string): string | null {
  const t = text.trim();
  const copy = /^copy\s*\(([\s\S]*)\)\s*to\s+stdout/i.exec(t);
  if (copy) return copy[1]!;
  return /^(select|with|insert|update|delete)\b/i.test(t) ? t : null;
}

interface PlanNode {
  'Node Type': string;
  'Relation Name'?: string;
  Plans?: PlanNode[];
}

const seqScansOfEvents = (n: PlanNode): number =>
  (n['Node Type'] === 'Seq Scan' && n['Relation Name'] === 'events' ? 1 : 0) +
  (n.Plans ?? []).reduce((a, p) => a + seqScansOfEvents(p), 0);

/** The statements among `captured` whose plan scans `events` sequentially. */
async function scanningEvents(db: pg.Pool, captured: Captured[]): Promise<string[]> {
  const out: string[] = [];
  const done = new Set<string>();
  const c = await db.connect();
  try {
    for (const q of captured) {
      const sql = plannable(q.text);
      if (!sql || done.has(sql) || !/\bevents\b/.test(sql)) continue;
      done.add(sql);
      await c.query('begin');
      try {
        await c.query('set local enable_seqscan = off');
        const r = await c.query<{ 'QUERY PLAN': { Plan: PlanNode }[] }>(
          `explain (format json) ${sql}`,
          q.values.slice(
            0,
            (sql.match(/\$(\d+)/g) ?? []).reduce((m, p) => Math.max(m, Number(p.slice(1))), 0),
          ),
        );
        if (seqScansOfEvents(r.rows[0]!['QUERY PLAN'][0]!.Plan) > 0) out.push(sql.replace(/\s+/g, ' '));
      } finally {
        await c.query('rollback');
      }
    }
  } finally {
    c.release();
  }
  return out;
}

const campaigns = standinCampaigns(['--seed', '5', '--quiet']);
let loop: LoopHarness;
const endpoints = inject('endpoints');
// Replay builds scratch schemas, which only the owner role may (platform/store/migrate.ts).
const ownerPool = createPool({
  connectionString: endpoints.ownerDatabaseUrl ?? endpoints.databaseUrl,
  max: 4,
});

beforeAll(async () => {
  loop = await campaigns.start(
    standinCampaign(
      3,
      { base: 1, miss_func: 1, miss_param: 1 },
      { pool: { injectionCadence: 'steps:1', injectionShare: 1 } },
    ),
  );
  await campaigns.runSteps(loop, 3);
  // A first rebuild, so that the one below resumes from its checkpoint.
  await replayCampaign(ownerPool, { campaignId: loop.campaignId, fresh: true });
}, 600_000);

afterAll(() => ownerPool.end());

describe('query plans of the repeated paths', () => {
  it('finds a sequential scan of events when a query has no index to use', async () => {
    const found = await scanningEvents(ownerPool, [
      { text: "select count(*) from events where payload->>'seedTaskId' = $1", values: ['x'] },
      { text: "select count(*) from events where payload->>'campaignId' = $1", values: [loop.campaignId] },
    ]);
    expect(found).toEqual(["select count(*) from events where payload->>'seedTaskId' = $1"]);
  });

  it('reaches events through an index on every query of planning, status, dashboard, lineage and replay', async () => {
    const paths: Record<string, () => Promise<unknown>> = {
      planning: async () => {
        await loop.trainStep(4);
        await loop.waitPlanned(4);
      },
      status: () => campaignStatus({ db: loop.pool, temporal: loop.client }, loop.campaignId),
      dashboard: async () => {
        await dashboardSeries(loop.pool, loop.campaignId);
        const { rows } = await loop.pool.query<{ task_id: string }>(
          'select task_id from pool_members where campaign_id = $1 limit 3',
          [loop.campaignId],
        );
        await rewardHistory(
          loop.pool,
          loop.campaignId,
          rows.map((r) => r.task_id),
        );
      },
      lineage: async () => {
        const generated = async () =>
          (
            await loop.pool.query<{ task_id: string }>(
              `select task_id from pool_members where campaign_id = $1 and origin = 'generated' limit 1`,
              [loop.campaignId],
            )
          ).rows;
        let rows = await generated();
        // The stand-in's judge rejects most candidates, and which ones depends on the order the
        // runs reach it: train on until one is injected (these steps' queries are checked too).
        for (let step = 5; rows.length === 0 && step <= 16; step++) {
          await loop.waitSynthesesDone();
          await loop.trainStep(step);
          await loop.waitPlanned(step);
          rows = await generated();
        }
        expect(rows).toHaveLength(1);
        await loadLineageIndex(loop.pool, loop.campaignId, rows[0]!.task_id);
        // `rods lineage TASK` without a campaign, and a lineage 404 that says where a task is
        expect(await campaignsOfTask(loop.pool, rows[0]!.task_id)).toContain(loop.campaignId);
        expect(await campaignsOfTask(loop.pool, 'no-such-task')).toEqual([]);
      },
      replay: () => replayCampaign(ownerPool, { campaignId: loop.campaignId }),
      // A checkpoint's manifest (the gateway records one, `rods manifest` and `rods audit verify`
      // recompute it): the steps' statistics records, the tasks' seeding and injection, the
      // campaign's checkpoints.
      manifest: async () => {
        const m = await computeManifest(
          loop.pool,
          loop.campaignId,
          { checkpointId: 'qp', runId: 'qp', trainerStep: 4, resumedFrom: null, retrainedSteps: [] },
          [],
        );
        // (the harness trains from step 2)
        expect(m.steps.map((s) => s.step)).toEqual([2, 3, 4]);
        expect(m.entries.length).toBeGreaterThan(0);
        await verifyManifests(loop.pool, loop.campaignId);
      },
    };
    const report: Record<string, { queries: number; scanningEvents: string[] }> = {};
    const texts: Record<string, string> = {};
    for (const [name, run] of Object.entries(paths)) {
      const captured = await capture(run);
      texts[name] = captured.map((q) => q.text).join('\n');
      report[name] = { queries: captured.length, scanningEvents: await scanningEvents(ownerPool, captured) };
    }
    // The paths ran what they stand for: the planner read the seeds' rejection runs and stored
    // its plan, the replay resumed into its schema.
    expect(texts.planning).toMatch(/from seed_rejection_runs/);
    expect(texts.planning).toMatch(/campaign_plans/);
    expect(texts.replay).toMatch(/replay_checkpoint/);
    // The dashboard's funnel comes from the projection's counts, not the campaign's events.
    expect(texts.dashboard).toMatch(/from synthesis_funnel_counts/);
    for (const [name, r] of Object.entries(report))
      expect(r.queries, `${name} sent no query`).toBeGreaterThan(0);
    expect(Object.fromEntries(Object.entries(report).map(([k, r]) => [k, r.scanningEvents]))).toEqual({
      planning: [],
      status: [],
      dashboard: [],
      lineage: [],
      replay: [],
      manifest: [],
    });
  });
});
