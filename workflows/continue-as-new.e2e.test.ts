// Continue-as-new under a lowered history threshold: a private Temporal dev server (the stack's
// own binary, in memory) suggests continue-as-new after a few dozen events; the campaign must
// carry its whole state across runs, and synthesis children started by an earlier run must
// still report to the current one, or, when they end without reporting, have their slot freed.
import { fileURLToPath } from 'node:url';
import { bundleWorkflowCode, Runtime, type WorkflowBundleWithSourceMap } from '@temporalio/worker';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { LoopHarness } from '../dev/harness/loop.js';
import { type PrivateTemporal, startPrivateTemporal } from '../dev/harness/private-temporal.js';
import {
  HANG_HEADERS,
  hangingSynthesisConfig,
  type StandinProcess,
  standinEndpoints,
  standinGenerator,
  startStandin,
} from '../dev/harness/standin.js';
import type { CampaignStatus } from '../domain/campaign-state.js';
import { installWorkerRuntime, workflowEnd } from '../platform/temporal/connect.js';

let server: PrivateTemporal | undefined;
let bundle: WorkflowBundleWithSourceMap;
let standin: StandinProcess;
let loop: LoopHarness;

beforeAll(async () => {
  server = await startPrivateTemporal({ suggestContinueAsNewAt: 40 });
  await installWorkerRuntime('WARN');
  bundle = await bundleWorkflowCode({
    logger: Runtime.instance().logger,
    workflowsPath: fileURLToPath(new URL('./index.ts', import.meta.url)),
  });
  standin = await startStandin(['--seed', '11']);
}, 180_000);

const children = new Set<string>();

afterAll(async () => {
  await loop?.terminate(children);
  await loop?.close();
  await standin?.stop();
  await server?.stop();
});

/** One simulated training step; returns the step. */
async function train(step: number): Promise<number> {
  await loop.trainStep(step);
  return step;
}

describe('campaign continue-as-new', () => {
  it('continues as new when the server suggests it and keeps the campaign state intact', async () => {
    loop = new LoopHarness({
      workflowBundle: bundle,
      endpoints: standinEndpoints(standin.url),
      config: {
        seeds: { perCategory: 3 },
        selection: {
          budgetPerStep: 2,
          perCategoryQuota: { base: 1, miss_func: 1, miss_param: 0, long_context: 0 },
          cooldownSteps: 0,
          maxConcurrentSyntheses: 2,
        },
        pool: { injectionCadence: 'steps:2' },
        generator: standinGenerator(),
      },
    });
    await loop.start();
    for (let step = 1; step <= 8; step++) {
      await loop.trainStep(step);
      await loop.waitPlanned(step);
    }
    const s = await loop.waitSynthesesDone();
    const history = await loop.client.workflow.getHandle(loop.workflowId).fetchHistory();

    // It did continue as new: the current run was started by a continue-as-new.
    expect(s.generation).toBeGreaterThanOrEqual(1);
    expect(
      history.events?.[0]?.workflowExecutionStartedEventAttributes?.continuedExecutionRunId,
    ).toBeTruthy();
    // The carried state agrees with the event store and the projections.
    expect(s.step).toBe(8);
    const one = async (sql: string) =>
      (await loop.pool.query<{ n: number }>(sql, [loop.campaignId])).rows[0]!.n;
    expect(s.totals.selected).toBe(
      await one(
        `select count(*)::int as n from events where type = 'SeedSelected' and payload->>'campaignId' = $1`,
      ),
    );
    expect(s.totals.injected).toBe(
      await one(
        `select count(*)::int as n from events where type = 'TaskInjected' and payload->>'campaignId' = $1`,
      ),
    );
    expect(s.totals.validated + s.totals.rejected).toBe(s.totals.selected);
    expect(s.poolVersion).toBe(
      await one('select version::int as n from pool_versions where campaign_id = $1'),
    );
    expect(s.totals.selected).toBeGreaterThan(0);
  }, 600_000);

  it('frees the slot of a child started by an earlier run that ends without reporting', async () => {
    await loop?.close();
    loop = new LoopHarness({
      workflowBundle: bundle,
      // Every generator call hangs: the synthesis stays running until it is terminated.
      endpoints: standinEndpoints(standin.url, HANG_HEADERS),
      config: hangingSynthesisConfig(),
    });
    await loop.start();
    let step = 0;
    let s: CampaignStatus | undefined;
    while (step < 10 && Object.keys(s?.running ?? {}).length === 0)
      s = await loop.waitPlanned(await train(++step));
    const [synthesisId, seed] = Object.entries(s!.running)[0] ?? [];
    expect(synthesisId, 'a synthesis started within 10 steps').toBeDefined();
    children.add(synthesisId!);
    const startedIn = s!.generation;
    // Steps go on (no free slot) until the campaign has continued as new with the child still running.
    while (step < 30 && s!.generation === startedIn) s = await loop.waitPlanned(await train(++step));
    expect(s!.generation).toBeGreaterThan(startedIn);
    expect(s!.running).toEqual({ [synthesisId!]: seed });
    expect(await workflowEnd(loop.client, synthesisId!)).toBe('running');

    await loop.client.workflow.getHandle(synthesisId!).terminate('chaos: terminated after a continue-as-new');

    const freed = await loop.waitSlotFreed(synthesisId!);
    expect(Object.values(freed.running)).not.toContain(seed);
    expect(freed.totals.validated + freed.totals.rejected).toBe(freed.totals.selected);
    expect(await loop.rejections(synthesisId!)).toEqual([{ reason_code: 'synthesis-terminated', seed }]);

    // The stopped campaign completes; the current run's history (the watcher's activity, the
    // patch marker) replays against the same code.
    const { result, patched } = await loop.stopAndReplay(bundle);
    expect(result).toMatchObject({ status: 'stopped', running: {} });
    expect(patched).toBe(true);
  }, 600_000);
});
