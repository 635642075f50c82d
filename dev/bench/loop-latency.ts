// Loop latency: with a zero-latency stand-in generator, the time from a step's watermark (its
// StepAggregated) to the TaskInjected of each candidate synthesized from a seed selected at that
// step, for at least N candidates; the simulated trainer closes the next step as soon as the
// previous one is planned (it never waits for synthesis). Baseline in the same run: the bare
// floor of starting a workflow that runs one no-op activity.
// With `--llm-latency-ms N` (1000 is a realistic vLLM call) the stand-in answers after N ms and
// the figure is the orchestration's share: p50 seed-to-injection / (p50 of a synthesis's
// sequential service time, the sum of its activities' run times up to its outcome, from its
// Temporal history + the median step period, the longest a validated candidate waits for the
// next injection). 1.0 would be straight-line code with no durable orchestration at all.
import { randomUUID } from 'node:crypto';
import { fileURLToPath } from 'node:url';
import type { Client } from '@temporalio/client';
import { bundleWorkflowCode } from '@temporalio/worker';
import { createDoctorWorker } from '../../activities/worker.js';
import { installWorkerRuntime, temporalClient } from '../../platform/temporal/connect.js';
import { doctorRoundTrip } from '../../workflows/doctor.js';
import { LoopHarness } from '../harness/loop.js';
import { standinCampaign, standinEndpoints, startStandin } from '../harness/standin.js';
import type { BenchResult } from './result.js';

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

/**
 * The sequential service time of a synthesis: the sum of its activities' run times (started to
 * completed) up to and including its outcome (recordOutcome); Augment runs after the outcome, so
 * the base candidate does not wait for it.
 */
async function serviceTimeMs(client: Client, workflowId: string): Promise<number> {
  const history = await client.workflow.getHandle(workflowId).fetchHistory();
  const events = history.events ?? [];
  const ms = (t: unknown) => {
    const ts = t as { seconds?: { toNumber(): number } | number; nanos?: number } | null | undefined;
    const sec = typeof ts?.seconds === 'number' ? ts.seconds : (ts?.seconds?.toNumber() ?? 0);
    return sec * 1000 + (ts?.nanos ?? 0) / 1e6;
  };
  const byId = new Map(events.map((e) => [String(e.eventId), e]));
  let total = 0;
  for (const e of events) {
    const done = e.activityTaskCompletedEventAttributes;
    if (!done) continue;
    const started = byId.get(String(done.startedEventId));
    const scheduled = byId.get(String(done.scheduledEventId));
    total += ms(e.eventTime) - ms(started?.eventTime);
    if (scheduled?.activityTaskScheduledEventAttributes?.activityType?.name === 'recordOutcome') break;
  }
  return total;
}

/** The times between consecutive steps' aggregation: how long a validated candidate waits at most. */
async function stepPeriodsMs(loop: LoopHarness): Promise<number[]> {
  const { rows } = await loop.pool.query<{ ms: number | null }>(
    `select extract(epoch from (recorded_at - lag(recorded_at) over (order by (payload->>'step')::bigint))) * 1000 as ms
       from events where type = 'StepAggregated' and payload->>'campaignId' = $1`,
    [loop.campaignId],
  );
  return rows.flatMap((r) => (r.ms === null ? [] : [Number(r.ms)]));
}

export default async function loopLatency(opts: Record<string, string | boolean>): Promise<BenchResult> {
  const target = Number(opts.candidates ?? 50);
  const log = (m: string) => opts.json || console.error(m);
  await installWorkerRuntime('ERROR');
  const workflowBundle = await bundleWorkflowCode({
    workflowsPath: fileURLToPath(new URL('../../workflows/index.ts', import.meta.url)),
    logger: { info() {}, warn() {}, error: console.error, debug() {}, trace() {}, log() {} } as never,
  });
  const llmLatencyMs = Number(opts['llm-latency-ms'] ?? 0);
  if (!(llmLatencyMs >= 0)) throw new Error('--llm-latency-ms must be a number >= 0');
  const standin = await startStandin(['--seed', '1', '--quiet', '--latency-ms', String(llmLatencyMs)]);
  const loop = new LoopHarness({
    endpoints: standinEndpoints(standin.url),
    workflowBundle,
    config: standinCampaign(
      25,
      { base: 3, miss_func: 3, miss_param: 3, long_context: 3 },
      { pool: { injectionCadence: 'steps:1', injectionShare: 1 } },
    ),
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
    const { rows } = await loop.pool.query<{ ms: number; synthesis_id: string | null }>(
      `select extract(epoch from (i.recorded_at - a.recorded_at)) * 1000 as ms, c.synthesis_id
         from events i
         join events a on a.type = 'StepAggregated' and a.payload->>'campaignId' = i.payload->>'campaignId'
          and (a.payload->>'step')::bigint = substring(i.payload->>'candidateId' from '~s([0-9]+)$')::bigint
         left join candidates c on c.campaign_id = i.payload->>'campaignId' and c.candidate_id = i.payload->>'candidateId'
        where i.type = 'TaskInjected' and i.payload->>'campaignId' = $1`,
      [loop.campaignId],
    );
    const lat = rows.map((r) => Number(r.ms));
    if (llmLatencyMs > 0) {
      const service: number[] = [];
      for (const r of rows)
        if (r.synthesis_id) service.push(await serviceTimeMs(loop.client, r.synthesis_id));
      const periods = await stepPeriodsMs(loop);
      // Where the time goes, per injected candidate: aggregation to synthesis start, the
      // synthesis' wall time to its validation, validation to injection.
      const parts = await loop.pool.query<{ start: number; run: number; wait: number }>(
        `select extract(epoch from (st.recorded_at - a.recorded_at)) * 1000 as start,
                extract(epoch from (v.recorded_at - st.recorded_at)) * 1000 as run,
                extract(epoch from (i.recorded_at - v.recorded_at)) * 1000 as wait
           from events i
           join candidates c on c.campaign_id = $1 and c.candidate_id = i.payload->>'candidateId'
           join events st on st.type = 'SynthesisStarted' and st.payload->>'synthesisId' = c.synthesis_id
           join events v on v.type = 'CandidateValidated' and v.payload->>'synthesisId' = c.synthesis_id
           join events a on a.type = 'StepAggregated' and a.payload->>'campaignId' = $1
            and (a.payload->>'step')::bigint = substring(i.payload->>'candidateId' from '~s([0-9]+)$')::bigint
          where i.type = 'TaskInjected' and i.payload->>'campaignId' = $1`,
        [loop.campaignId],
      );
      const part = (k: 'start' | 'run' | 'wait') =>
        Math.round(
          pct(
            parts.rows.map((r) => Number(r[k])),
            50,
          ),
        );
      const p50 = pct(lat, 50);
      const s50 = pct(service, 50);
      const period = pct(periods, 50);
      return {
        mode: 'llm-latency',
        llm_latency_ms: llmLatencyMs,
        candidates: lat.length,
        p50_seed_to_injection_ms: Math.round(p50),
        p99_seed_to_injection_ms: Math.round(pct(lat, 99)),
        p50_sequential_service_ms: Math.round(s50),
        median_step_period_ms: Math.round(period),
        p50_aggregated_to_synthesis_start_ms: part('start'),
        p50_synthesis_wall_to_validated_ms: part('run'),
        p50_validated_to_injected_ms: part('wait'),
        ratio: Number((p50 / (s50 + period)).toFixed(3)),
      };
    }
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
