// A test file's campaign against the stand-in generator: the workflow bundle and the stand-in
// process start once for the file, a LoopHarness campaign with an in-process worker per test,
// and everything stops after the file. Call standinCampaigns() at the top level of the file.
import { fileURLToPath } from 'node:url';
import { bundleWorkflowCode, Runtime, type WorkflowBundleWithSourceMap } from '@temporalio/worker';
import { afterAll, beforeAll } from 'vitest';
import { LoopHarness, type LoopOptions } from '../../dev/harness/loop.js';
import {
  type StandinProcess,
  standinEndpoints,
  standinGenerator,
  startStandin,
} from '../../dev/harness/standin.js';
import { installWorkerRuntime } from '../../platform/temporal/connect.js';

/** Selection that picks one seed of each category per step from the first observed group. */
export const ONE_SEED_PER_CATEGORY = {
  budgetPerStep: 4,
  perCategoryQuota: { base: 1, miss_func: 1, miss_param: 1, long_context: 1 },
  cooldownSteps: 1,
  minGroups: 1,
};

export interface StandinCampaigns {
  /** The stand-in process (its URL, /health). */
  readonly standin: StandinProcess;
  /**
   * Starts a campaign with this config (the stand-in as its generator, with `opts.generator`'s
   * settings) and an in-process worker; `opts.headers` go with every generator request (the
   * stand-in's fault headers), the rest to the harness.
   */
  start(config: Record<string, unknown>, opts?: StartOptions): Promise<LoopHarness>;
  /** Trains steps 1..n, waiting for each plan and its syntheses. */
  runSteps(loop: LoopHarness, n: number): Promise<void>;
}

export interface StartOptions extends Omit<LoopOptions, 'config' | 'endpoints' | 'workflowBundle'> {
  headers?: Record<string, string>;
  generator?: Record<string, unknown>;
}

export function standinCampaigns(standinArgs: string[]): StandinCampaigns {
  let bundle: WorkflowBundleWithSourceMap;
  let standin: StandinProcess | undefined;
  const loops: LoopHarness[] = [];
  beforeAll(async () => {
    await installWorkerRuntime('WARN');
    bundle = await bundleWorkflowCode({
      logger: Runtime.instance().logger,
      workflowsPath: fileURLToPath(new URL('../../workflows/index.ts', import.meta.url)),
    });
    standin = await startStandin(standinArgs);
  }, 180_000);
  afterAll(async () => {
    for (const l of loops) await l.close();
    await standin?.stop();
  });
  return {
    get standin() {
      if (!standin) throw new Error('the stand-in starts in beforeAll');
      return standin;
    },
    async start(config, opts = {}) {
      const { headers, generator, ...harness } = opts;
      const loop = new LoopHarness({
        ...harness,
        endpoints: standinEndpoints(this.standin.url, headers),
        workflowBundle: bundle,
        config: { ...config, generator: standinGenerator(generator) },
      });
      loops.push(loop);
      await loop.start();
      return loop;
    },
    async runSteps(loop, n) {
      for (let step = 1; step <= n; step++) {
        await loop.trainStep(step);
        await loop.waitPlanned(step);
        await loop.waitSynthesesDone();
      }
    },
  };
}
