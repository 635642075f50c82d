// Synthesis slots are freed on every child outcome: a synthesis child terminated before it could
// report, or ended by its execution timeout (synthesis.executionTimeoutSeconds), leaves no entry in
// the campaign's running set, its seed is no longer in flight, the outcome is an event in the
// store, and a stopped campaign records CampaignStopped with its reason and completes.
import { fileURLToPath } from 'node:url';
import { bundleWorkflowCode, Runtime, type WorkflowBundleWithSourceMap } from '@temporalio/worker';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { LoopHarness } from '../dev/harness/loop.js';
import {
  HANG_HEADERS,
  hangingSynthesisConfig,
  type StandinProcess,
  standinEndpoints,
  startStandin,
} from '../dev/harness/standin.js';
import type { CampaignStatus } from '../domain/campaign-state.js';
import { installWorkerRuntime, workflowEnd } from '../platform/temporal/connect.js';

let bundle: WorkflowBundleWithSourceMap;
let standin: StandinProcess;
let loop: LoopHarness;
const started = new Set<string>();

beforeAll(async () => {
  await installWorkerRuntime('WARN');
  bundle = await bundleWorkflowCode({
    logger: Runtime.instance().logger,
    workflowsPath: fileURLToPath(new URL('./index.ts', import.meta.url)),
  });
  standin = await startStandin(['--seed', '12', '--quiet']);
}, 180_000);

afterAll(async () => {
  // Children left hanging on the generator are terminated, not left on the shared server.
  await loop?.terminate(started);
  await loop?.close();
  await standin?.stop();
});

describe('synthesis slots', () => {
  it('frees the slot of a child terminated before it reports, and a stopped campaign completes', async () => {
    loop = new LoopHarness({
      workflowBundle: bundle,
      endpoints: standinEndpoints(standin.url, HANG_HEADERS),
      config: hangingSynthesisConfig(),
    });
    await loop.start();
    let s: CampaignStatus | undefined;
    for (let step = 1; step <= 10 && Object.keys(s?.running ?? {}).length === 0; step++) {
      await loop.trainStep(step);
      s = await loop.waitPlanned(step);
    }
    const [synthesisId, seed] = Object.entries(s!.running)[0] ?? [];
    expect(synthesisId, 'a synthesis started within 10 steps').toBeDefined();
    started.add(synthesisId!);
    expect(await workflowEnd(loop.client, synthesisId!)).toBe('running');

    await loop.client.workflow.getHandle(synthesisId!).terminate('chaos: terminated right after it started');

    // The slot is freed: the running set no longer holds the run, nor its seed.
    const freed = await loop.waitSlotFreed(synthesisId!);
    expect(Object.values(freed.running)).not.toContain(seed);
    expect(freed.totals.validated + freed.totals.rejected).toBe(freed.totals.selected);
    expect(await loop.rejections(synthesisId!)).toEqual([{ reason_code: 'synthesis-terminated', seed }]);

    // A stopped campaign completes (it waits for its running syntheses, and none is left), and
    // the history with the freed slot replays against the same code (the patch marker is in it).
    const { result, patched } = await loop.stopAndReplay(bundle);
    expect(result).toMatchObject({ status: 'stopped', running: {} });
    expect(patched).toBe(true);
  }, 300_000);

  it('ends a child that outlives its execution timeout, frees its slot, and records the stop with its reason', async () => {
    const timed = new LoopHarness({
      workflowBundle: bundle,
      endpoints: standinEndpoints(standin.url, HANG_HEADERS),
      config: { ...hangingSynthesisConfig(), synthesis: { executionTimeoutSeconds: 10 } },
    });
    await timed.start();
    try {
      let s: CampaignStatus | undefined;
      for (let step = 1; step <= 10 && Object.keys(s?.running ?? {}).length === 0; step++) {
        await timed.trainStep(step);
        s = await timed.waitPlanned(step);
      }
      const [synthesisId, seed] = Object.entries(s!.running)[0] ?? [];
      expect(synthesisId, 'a synthesis started within 10 steps').toBeDefined();
      // Its generator calls hang for ever; Temporal ends the child at 10 s.
      const freed = await timed.waitSlotFreed(synthesisId!, 90_000);
      expect(Object.values(freed.running)).not.toContain(seed);
      expect(await workflowEnd(timed.client, synthesisId!)).toBe('timed-out');
      expect(await timed.rejections(synthesisId!)).toEqual([{ reason_code: 'synthesis-timed-out', seed }]);

      const { result, patched } = await timed.stopAndReplay(bundle);
      expect(result.status).toBe('stopped');
      expect(patched).toBe(true);
      const stopped = await timed.pool.query<{ reason: string | null }>(
        `select payload->>'reason' as reason from events where type = 'CampaignStopped' and payload->>'campaignId' = $1`,
        [timed.campaignId],
      );
      expect(stopped.rows).toEqual([{ reason: 'test' }]);
      const row = await timed.pool.query<{ status: string }>(
        'select status from campaigns where campaign_id = $1',
        [timed.campaignId],
      );
      expect(row.rows[0]?.status).toBe('stopped');
    } finally {
      await timed.close();
    }
  }, 300_000);
});
