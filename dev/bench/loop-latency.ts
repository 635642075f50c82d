// Loop latency: with a zero-latency stand-in generator, the time from a step's watermark (its
// StepAggregated) to the TaskInjected of each candidate synthesized from a seed selected at that
// step, for at least N candidates; the simulated trainer closes the next step as soon as the
// previous one is planned (it never waits for synthesis). Baseline in the same run: the bare
// floor of starting a workflow that runs one no-op activity.
import { randomUUID } from 'node:crypto';
import { fileURLToPath } from 'node:url';
import { bundleWorkflowCode } from '@temporalio/worker';
import { installWorkerRuntime, temporalClient } from '../../temporal/connect.js';
import { createDoctorWorker } from '../../temporal/worker.js';
import { doctorRoundTrip } from '../../workflows/doctor.js';
import { LoopHarness } from '../harness/loop.js';
import { standinEndpoints, standinGenerator, startStandin } from '../harness/standin.js';
import type { BenchResult } from './run.js';

function pct(xs: number[], p: number): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.max(0, Math.ceil((p / 100) * s.length) - 1))]!;
}

async function floor(samples: number): Promise<number[]> {
  const taskQueue = `bench-floor-${randomUUID()}`;
  const { worker, close: closeWorker } = await createDoctorWorker(taskQueue);
  const { client, close } = await temporalClient();
  const out: number[] = [];
  await worker.runUntil(async () => {
    for (let i = 0; i < samples + 3; i++) {
      const t0 = performance.now();
      await client.workflow.execute(doctorRoundTrip, {
        taskQueue,
        workflowId: `floor-${randomUUID()}`,
        args: ['x'],
      });
      if (i >= 3) out.push(performance.now() - t0); // the first runs warm caches up
    }
  });
  await close();
  await closeWorker();
  return out;
}

export default async function loopLatency(opts: Record<string, string | boolean>): Promise<BenchResult> {
  const target = Number(opts.candidates ?? 50);
  const log = (m: string) => opts.json || console.error(m);
  await installWorkerRuntime('ERROR');
  const workflowBundle = await bundleWorkflowCode({
    workflowsPath: fileURLToPath(new URL('../../workflows/index.ts', import.meta.url)),
    logger: { info() {}, warn() {}, error: console.error, debug() {}, trace() {}, log() {} } as never,
  });
  const standin = await startStandin(['--seed', '1', '--quiet']);
  const loop = new LoopHarness({
    endpoints: standinEndpoints(standin.url),
    workflowBundle,
    config: {
      seeds: { perCategory: 25 },
      selection: {
        budgetPerStep: 12,
        perCategoryQuota: { base: 3, miss_func: 3, miss_param: 3, long_context: 3 },
        cooldownSteps: 0,
        maxConcurrentSyntheses: 12,
      },
      pool: { injectionCadence: 'steps:1', injectionShare: 1 },
      generator: standinGenerator(),
    },
  });
  try {
    await loop.start();
    let injected = 0;
    for (let step = 1; injected < target && step <= 200; step++) {
      await loop.trainStep(step);
      await loop.waitPlanned(step, 300_000);
      const r = await loop.pool.query<{ n: number }>(
        `select count(*)::int as n from events where type = 'TaskInjected' and payload->>'campaignId' = $1`,
        [loop.campaignId],
      );
      injected = r.rows[0]!.n;
      log(`step ${step}: ${injected} injected`);
    }
    const { rows } = await loop.pool.query<{ ms: number }>(
      `select extract(epoch from (i.recorded_at - a.recorded_at)) * 1000 as ms
         from events i
         join events a on a.type = 'StepAggregated' and a.payload->>'campaignId' = i.payload->>'campaignId'
          and (a.payload->>'step')::bigint = substring(i.payload->>'candidateId' from '~s([0-9]+)$')::bigint
        where i.type = 'TaskInjected' and i.payload->>'campaignId' = $1`,
      [loop.campaignId],
    );
    const lat = rows.map((r) => Number(r.ms));
    const fl = await floor(50);
    const p50 = pct(lat, 50);
    const f50 = pct(fl, 50);
    return {
      candidates: lat.length,
      p50_ms: Math.round(p50),
      p99_ms: Math.round(pct(lat, 99)),
      floor_p50_ms: Number(f50.toFixed(1)),
      floor_p99_ms: Number(pct(fl, 99).toFixed(1)),
      overhead_ratio: Number((p50 / f50).toFixed(1)),
    };
  } finally {
    await loop.close();
    await standin.stop();
  }
}
