import { execFile } from 'node:child_process';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { bundleWorkflowCode, Runtime } from '@temporalio/worker';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { LoopHarness } from '../../dev/harness/loop.js';
import {
  type StandinProcess,
  standinEndpoints,
  standinGenerator,
  startStandin,
} from '../../dev/harness/standin.js';
import { createPool } from '../../platform/store/db.js';
import { installWorkerRuntime } from '../../platform/temporal/connect.js';
import { ROOT } from '../../test/support/sources.js';
import { kafkaStatsCheck } from './kafka-source.js';
import { replayCampaign } from './replay.js';
import { whatIf } from './whatif.js';

const execFileP = promisify(execFile);
let standin: StandinProcess;
let loop: LoopHarness;
// Replays build scratch schemas, which only the owner role may (platform/store/migrate.ts).
const endpoints = inject('endpoints');
const ownerPool = createPool({
  connectionString: endpoints.ownerDatabaseUrl ?? endpoints.databaseUrl,
  max: 4,
});

async function rods(args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  try {
    const { stdout, stderr } = await execFileP(process.execPath, [path.join(ROOT, 'bin/rods.mjs'), ...args], {
      cwd: ROOT,
    });
    return { code: 0, stdout, stderr };
  } catch (e) {
    const err = e as { code: number; stdout: string; stderr: string };
    return { code: err.code, stdout: err.stdout, stderr: err.stderr };
  }
}

beforeAll(async () => {
  await installWorkerRuntime('WARN');
  const workflowBundle = await bundleWorkflowCode({
    logger: Runtime.instance().logger,
    workflowsPath: fileURLToPath(new URL('../../workflows/index.ts', import.meta.url)),
  });
  standin = await startStandin(['--seed', '9', '--quiet']);
  loop = new LoopHarness({
    endpoints: standinEndpoints(standin.url),
    workflowBundle,
    config: {
      seeds: { perCategory: 4 },
      selection: {
        budgetPerStep: 4,
        perCategoryQuota: { base: 1, miss_func: 1, miss_param: 1, long_context: 1 },
        cooldownSteps: 0,
        maxConcurrentSyntheses: 4,
      },
      pool: { injectionCadence: 'steps:2', injectionShare: 1 },
      generator: standinGenerator(),
    },
  });
  await loop.start();
  for (let step = 1; step <= 6; step++) {
    await loop.trainStep(step);
    await loop.waitPlanned(step);
    await loop.waitSynthesesDone();
  }
}, 600_000);

afterAll(async () => {
  await loop?.close();
  await standin?.stop();
  await ownerPool.end();
});

describe('replay', () => {
  it('rebuilds every projection from the event history equal to the live one, and resumes', async () => {
    const injected = await loop.pool.query(
      `select 1 from pool_members where campaign_id = $1 and origin = 'generated'`,
      [loop.campaignId],
    );
    expect(injected.rowCount).toBeGreaterThan(0);
    const r = await replayCampaign(ownerPool, { campaignId: loop.campaignId, fresh: true });
    expect(r.tables.map((t) => [t.table, t.equal])).toEqual([
      ['campaigns', true],
      ['pool_members', true],
      ['pool_versions', true],
      ['candidates', true],
      ['campaign_configs', true],
      ['seed_rejection_runs', true],
      ['synthesis_funnel_marks', true],
      ['synthesis_funnel_counts', true],
      ['open_syntheses', true],
      ['synthesis_tokens', true],
      ['task_stats', true],
    ]);
    expect(r.equal).toBe(true);
    // The seeds' rejection runs and the funnel were rebuilt, not empty tables compared.
    for (const t of [
      'seed_rejection_runs',
      'synthesis_funnel_marks',
      'synthesis_funnel_counts',
      'synthesis_tokens',
    ])
      expect(r.tables.find((x) => x.table === t)!.liveRows, t).toBeGreaterThan(0);
    expect(r.tables.find((t) => t.table === 'pool_members')!.replayRows).toBe(
      r.tables.find((t) => t.table === 'pool_members')!.liveRows,
    );
    // A second run resumes from its checkpoint and replays nothing new.
    const again = await replayCampaign(ownerPool, { campaignId: loop.campaignId });
    expect(again.resumedFrom).toBe(r.events);
    expect(again.equal).toBe(true);
  });

  it('--to-step S equals the pool version and members recorded at step S', async () => {
    for (const step of [2, 3]) {
      const r = await replayCampaign(ownerPool, { campaignId: loop.campaignId, toStep: step, fresh: true });
      expect(r.tables[0]!.table).toBe(`pool at step ${step}`);
      expect(r.equal).toBe(true);
    }
  });

  it('recomputes the statistics from the reward topic equal to the live ones', async () => {
    const k = await kafkaStatsCheck(loop.pool, loop.campaignId, loop.topic);
    expect(k.equal).toBe(true);
    expect(k.groups).toBeGreaterThan(0);
  });

  it('reports the differing rows when a live projection row was changed', async () => {
    const victim = (
      await loop.pool.query<{ task_id: string }>(
        `select task_id from pool_members where campaign_id = $1 limit 1`,
        [loop.campaignId],
      )
    ).rows[0]!.task_id;
    await loop.pool.query(
      `update pool_members set depth = depth + 7 where campaign_id = $1 and task_id = $2`,
      [loop.campaignId, victim],
    );
    try {
      const r = await replayCampaign(ownerPool, { campaignId: loop.campaignId, fresh: true });
      const members = r.tables.find((t) => t.table === 'pool_members')!;
      expect(members.equal).toBe(false);
      expect(members.onlyLive[0]).toMatchObject({ task_id: victim });
      expect(r.equal).toBe(false);
    } finally {
      await loop.pool.query(
        `update pool_members set depth = depth - 7 where campaign_id = $1 and task_id = $2`,
        [loop.campaignId, victim],
      );
    }
  });

  it('the CLI prints the report with the audit, and refuses bad input with exit 2', async () => {
    const ok = await rods(['replay', '--campaign', loop.campaignId, '--fresh', '--json']);
    expect(ok.code).toBe(0);
    const report = JSON.parse(ok.stdout);
    expect(report).toMatchObject({ equal: true, audit: { ok: true } });
    expect(report.audit.events).toBeGreaterThan(0);
    // Rebuild only, then a resume that compares: it starts from the rebuild's checkpoint.
    const rebuilt = await rods([
      'replay',
      '--campaign',
      loop.campaignId,
      '--fresh',
      '--no-compare',
      '--json',
    ]);
    expect(rebuilt.code).toBe(0);
    expect(JSON.parse(rebuilt.stdout)).toMatchObject({ equal: null, compared: false, tables: [] });
    const resumed = JSON.parse((await rods(['replay', '--campaign', loop.campaignId, '--json'])).stdout);
    expect(resumed).toMatchObject({ equal: true, resumedFrom: JSON.parse(rebuilt.stdout).events });
    expect(
      (await rods(['replay', '--campaign', loop.campaignId, '--no-compare', '--to-step', '2'])).code,
    ).toBe(2);
    expect((await rods(['replay', '--campaign', loop.campaignId, '--to-step', '999'])).code).toBe(2);
    expect((await rods(['replay', '--campaign', 'no-such-campaign'])).code).toBe(2);
    expect((await rods(['replay', '--campaign', loop.campaignId, '--source', 'tape'])).code).toBe(2);
  });

  it("whatif with the campaign's own thresholds reproduces every decision; other thresholds differ, with the limits stated", async () => {
    const own = await whatIf(loop.pool, { campaignId: loop.campaignId, topic: loop.topic, overrides: {} });
    expect(own.steps).toHaveLength(6);
    for (const s of own.steps) {
      expect([s.step, s.selected.jaccard, s.retired.jaccard, s.injected.jaccard]).toEqual([s.step, 1, 1, 1]);
    }
    expect(own.totals.selected.actual).toBeGreaterThan(0);
    expect(own.totals.injected.actual).toBeGreaterThan(0);
    expect(own.reproduced).toBe(true);
    // Every step was decided with its groups read (none came after), from what was read ahead.
    expect(own.lateGroups).toBe(0);
    expect(own.readAhead).toBeGreaterThan(0);
    const other = await whatIf(loop.pool, {
      campaignId: loop.campaignId,
      topic: loop.topic,
      overrides: { low: 0.6, high: 0.7 },
    });
    expect(other.reproduced).toBe(false);
    expect(other.limits).toMatch(/rewards that would have followed differ/);
    const bad = await rods(['whatif', '--campaign', loop.campaignId, '--low', '0.9', '--high', '0.1']);
    expect(bad.code).toBe(2);
    expect((await rods(['whatif', '--campaign', loop.campaignId, '--low', '1.5'])).code).toBe(2);
    expect((await rods(['whatif', '--campaign', 'no-such-campaign'])).code).toBe(2);

    // Pure φ (the paper's selection) against the campaign, which ran with the variance guard.
    const pure = await rods([
      'whatif',
      '--campaign',
      loop.campaignId,
      '--variance-guard',
      'off',
      '--min-groups',
      '1',
      '--max-stale',
      '0',
      '--json',
    ]);
    expect(pure.code).toBe(0);
    const report = JSON.parse(pure.stdout);
    expect(report.config).toMatchObject({ varianceGuard: 'off', minGroups: 1, maxStaleSteps: 0 });
    expect(own.config).toMatchObject({ varianceGuard: 'skip', minGroups: 2, maxStaleSteps: 20 });
    expect(report.steps).toHaveLength(6);
    expect((await rods(['whatif', '--campaign', loop.campaignId, '--variance-guard', 'maybe'])).code).toBe(2);
    expect((await rods(['whatif', '--campaign', loop.campaignId, '--min-groups', '0'])).code).toBe(2);
  });
});
