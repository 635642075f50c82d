// Ablation switches on the live pipeline (config.ablation): with the judge off, a candidate that
// passes the gates and re-executes is validated without an LLM verdict; with injection off the
// pool stays static while candidates wait in the queue. The switches are in CampaignStarted.
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
  standin = await startStandin(['--seed', '11']);
}, 180_000);

afterAll(async () => {
  await loop?.close();
  await standin?.stop();
});

describe('ablations', () => {
  it('judge off and injection off: candidates validated without a verdict, nothing injected, all recorded', async () => {
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
        pool: { injectionCadence: 'steps:2' },
        ablation: { judge: false, injection: false },
        generator: standinGenerator(),
      },
    });
    await loop.start();
    for (let step = 1; step <= 4; step++) {
      await loop.trainStep(step);
      await loop.waitPlanned(step);
      await loop.waitSynthesesDone();
    }
    const q = async <T>(sql: string) => (await loop.pool.query<T & object>(sql, [loop.campaignId])).rows;
    const started = await q<{ config: string }>(
      `select payload->>'config' as config from events where type = 'CampaignStarted' and payload->>'campaignId' = $1`,
    );
    expect(JSON.parse(started[0]!.config)).toMatchObject({ ablation: { judge: false, injection: false } });

    const validated = await q<{ judge_model: string }>(
      `select payload->>'judgeModel' as judge_model from events where type = 'CandidateValidated' and payload->>'campaignId' = $1`,
    );
    expect(validated.length).toBeGreaterThan(0);
    expect(new Set(validated.map((v) => v.judge_model))).toEqual(new Set(['none']));
    // The judge's StageCompleted is the critique stage with a model; the gates' has none.
    const stages = await q<{ stage: string; model: string | null }>(
      `select distinct payload->>'stage' as stage, payload->>'model' as model from events
        where type = 'StageCompleted' and payload->>'campaignId' = $1`,
    );
    expect(stages).toContainEqual({ stage: 'critique', model: null });
    expect(stages).toContainEqual({ stage: 'rewrite', model: expect.any(String) });
    expect(stages.filter((s) => s.stage === 'critique' && s.model !== null)).toEqual([]);

    expect(
      await q(`select 1 from events where type = 'TaskInjected' and payload->>'campaignId' = $1`),
    ).toEqual([]);
    const generated = await q(`select 1 from pool_members where campaign_id = $1 and origin = 'generated'`);
    expect(generated).toEqual([]);
  });
});
