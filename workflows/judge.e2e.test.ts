// The judge in a live campaign: its prompt carries the candidate's execution (each turn's state),
// and a verdict that contradicts its own scores is overridden by the rule, the disagreement kept
// in the candidate's lineage.
import { fileURLToPath } from 'node:url';
import { bundleWorkflowCode, type WorkflowBundleWithSourceMap } from '@temporalio/worker';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { LoopHarness } from '../dev/harness/loop.js';
import {
  type StandinProcess,
  standinEndpoints,
  standinGenerator,
  startStandin,
} from '../dev/harness/standin.js';
import { installWorkerRuntime } from '../temporal/connect.js';

let bundle: WorkflowBundleWithSourceMap;
let standin: StandinProcess;
let loop: LoopHarness;

beforeAll(async () => {
  await installWorkerRuntime('WARN');
  bundle = await bundleWorkflowCode({ workflowsPath: fileURLToPath(new URL('./index.ts', import.meta.url)) });
  // Every judge answer flips its verdict against its scores.
  standin = await startStandin(['--seed', '5', '--contradict-rate', '1']);
}, 180_000);

afterAll(async () => {
  await loop?.close();
  await standin?.stop();
});

describe('the judge', () => {
  it('sees the execution states, and the rule overrides a verdict that contradicts the scores', async () => {
    loop = new LoopHarness({
      endpoints: standinEndpoints(standin.url),
      workflowBundle: bundle,
      config: {
        seeds: { perCategory: 4 },
        selection: {
          budgetPerStep: 4,
          perCategoryQuota: { base: 1, miss_func: 1, miss_param: 1, long_context: 1 },
          cooldownSteps: 1,
          minGroups: 1,
        },
        generator: standinGenerator(),
      },
    });
    await loop.start();
    for (let step = 1; step <= 3; step++) {
      await loop.trainStep(step);
      await loop.waitPlanned(step);
      await loop.waitSynthesesDone();
    }
    const health = (await (await fetch(standin.url.replace(/\/v1$/, '/health'))).json()) as {
      stats: { byStage: Record<string, number>; judgeWithStates: number; contradicted: number };
    };
    expect(health.stats.byStage.judge).toBeGreaterThan(0);
    expect(health.stats.judgeWithStates).toBe(health.stats.byStage.judge);
    expect(health.stats.contradicted).toBe(health.stats.byStage.judge);

    // The stand-in's scores accept most candidates; its flipped verdicts said reject.
    const { rows } = await loop.pool.query<{ lineage: Record<string, unknown> }>(
      `select lineage from candidates where campaign_id = $1 and status in ('validated', 'injected')`,
      [loop.campaignId],
    );
    expect(rows.length).toBeGreaterThan(0);
    for (const r of rows) {
      expect(r.lineage.judgeVerdict).toBe('accept');
      expect(r.lineage.judgeDisagreements).toEqual([{ round: 0, judge: 'reject', rule: 'accept' }]);
      expect(r.lineage.judgeReasons).toEqual(
        expect.arrayContaining([expect.stringMatching(/^the judge said reject, but its scores give accept/)]),
      );
    }
  });
});
