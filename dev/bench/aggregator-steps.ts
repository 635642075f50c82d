// Training steps applied the way a live aggregator sees them once it has caught up: each step's
// groups (one per task) arrive as one small batch per partition, so every batch touches each of
// its tasks once. Measured with the task cache (stages/aggregator/task-cache.ts) and, as the baseline in
// the same run, with every task read in full from its stored row (`--task-cache 0`, the behaviour
// before the cache). Alternating rounds, so load that comes and goes hits both. Options: --steps
// per round (default 150), --tasks (800), --rounds (2 per side).
import { randomUUID } from 'node:crypto';
import { defaultRegistry } from '../../platform/codec/registry.js';
import { registerCampaign } from '../../platform/store/campaigns.js';
import { createPool } from '../../platform/store/db.js';
import { migrate } from '../../platform/store/migrate.js';
import { installNodeSha256 } from '../../platform/util/node-sha256.js';
import { processBatch, type RewardRecord } from '../../stages/aggregator/batch.js';
import { CampaignCache } from '../../stages/aggregator/campaign-cache.js';
import { TaskStateCache } from '../../stages/aggregator/task-cache.js';
import { encodeRecord } from '../../stages/aggregator/trace.js';
import type { BenchResult } from './result.js';

const PARTITIONS = 6;

export default async function aggregatorStepsBench(
  opts: Record<string, string | boolean>,
): Promise<BenchResult> {
  const steps = Number(opts.steps ?? 150);
  const tasks = Number(opts.tasks ?? 800);
  const rounds = Number(opts.rounds ?? 2);
  const log = (m: string) => opts.json || console.error(m);
  installNodeSha256();
  await migrate();
  const pool = createPool({ application: 'rods-bench-aggregator-steps', max: 4 });
  const registry = defaultRegistry();

  // One campaign per round; the records of a step are encoded before its clock starts.
  const round = async (cached: boolean) => {
    const campaignId = `bench-steps-${randomUUID().slice(0, 8)}`;
    await registerCampaign(pool, { campaignId });
    const deps = {
      pool,
      registry,
      campaigns: new CampaignCache(pool),
      groupId: 'bench-aggregator-steps',
      deadLetter: async () => {},
      tasks: cached ? new TaskStateCache() : undefined,
    };
    const topic = `bench.steps.${campaignId}`;
    const offsets = new Array<number>(PARTITIONS).fill(0);
    const ms: number[] = [];
    let cpu = 0;
    let events = 0;
    for (let step = 1; step <= steps; step++) {
      const batches: RewardRecord[][] = Array.from({ length: PARTITIONS }, () => []);
      for (let t = 0; t < tasks; t++) {
        const p = t % PARTITIONS;
        const r = encodeRecord(
          {
            kind: 'group',
            group: {
              eventId: randomUUID(),
              campaignId,
              taskId: `task-${t}`,
              step,
              // Success rates spread over [0, 1): tasks in every band, some changing band.
              rewards: Array.from({ length: 16 }, () => (Math.random() < (t % 20) / 20 ? 1 : 0)),
            },
          },
          campaignId,
        );
        batches[p]!.push({ offset: String(offsets[p]!++), key: Buffer.from(r.key), value: r.value });
      }
      const c0 = process.cpuUsage();
      const t0 = performance.now();
      for (let p = 0; p < PARTITIONS; p++) events += (await processBatch(deps, topic, p, batches[p]!)).events;
      ms.push(performance.now() - t0);
      const c = process.cpuUsage(c0);
      cpu += (c.user + c.system) / 1000;
    }
    ms.sort((a, b) => a - b);
    return { medianMs: ms[ms.length >> 1]!, cpuMs: cpu / steps, eventsPerGroup: events / (steps * tasks) };
  };

  type Round = Awaited<ReturnType<typeof round>>;
  const sides = { cached: [] as Round[], full: [] as Round[] };
  try {
    for (let i = 0; i < rounds; i++) {
      for (const cached of [false, true]) {
        const r = await round(cached);
        (cached ? sides.cached : sides.full).push(r);
        log(
          `${cached ? 'task cache' : 'full reads'}: ${r.medianMs.toFixed(1)} ms per step, ${r.cpuMs.toFixed(1)} ms CPU`,
        );
      }
    }
  } finally {
    await pool.end();
  }
  const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[xs.length >> 1]!;
  const cachedMs = median(sides.cached.map((r) => r.medianMs));
  const fullMs = median(sides.full.map((r) => r.medianMs));
  const round2 = (x: number) => Math.round(x * 100) / 100;
  return {
    steps_per_round: steps,
    tasks,
    rounds,
    partitions: PARTITIONS,
    p50_step_ms: round2(cachedMs),
    baseline_full_read_p50_step_ms: round2(fullMs),
    cpu_ms_per_step: round2(median(sides.cached.map((r) => r.cpuMs))),
    baseline_cpu_ms_per_step: round2(median(sides.full.map((r) => r.cpuMs))),
    events_appended_per_group: round2(median(sides.cached.map((r) => r.eventsPerGroup))),
    ratio: round2(fullMs / cachedMs),
  };
}
