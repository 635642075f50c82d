// A burst of records of one campaign that the store refuses, ahead of another campaign's step on
// one partition (test/support/aggregator/failing-burst.ts): the time from the aggregator's start to
// the healthy step closed, against the same layout with nothing refused (the baseline, in the
// same run, alternating). The difference is the delay one campaign's failures cost another.
// Options: --burst (default 5000), --tasks (healthy groups, 50), --rounds (1 per side).

import { loadEndpoints } from '../../platform/config/endpoints.js';
import { createPool } from '../../platform/store/db.js';
import { migrate } from '../../platform/store/migrate.js';
import { runFailingBurst } from '../../test/support/aggregator/failing-burst.js';
import type { BenchResult } from './result.js';

export default async function isolationBench(opts: Record<string, string | boolean>): Promise<BenchResult> {
  const burst = Number(opts.burst ?? 5000);
  const tasks = Number(opts.tasks ?? 50);
  const rounds = Number(opts.rounds ?? 1);
  const log = (m: string) => opts.json || console.error(m);
  await migrate();
  const pool = createPool({ application: 'rods-bench-isolation', max: 6 });
  const { ownerDatabaseUrl, databaseUrl } = loadEndpoints();
  const owner = createPool({ connectionString: ownerDatabaseUrl ?? databaseUrl, max: 1 });
  const sides = { failing: [] as number[], clean: [] as number[], resolved: [] as number[] };
  try {
    for (let i = 0; i < rounds; i++)
      for (const failing of [false, true]) {
        const r = await runFailingBurst({ pool, owner, burst, tasks, failing });
        (failing ? sides.failing : sides.clean).push(r.healthyStepClosedMs);
        if (failing) sides.resolved.push(r.failingResolvedMs);
        log(
          `${failing ? 'failing burst' : 'clean burst'}: healthy step closed after ${r.healthyStepClosedMs} ms, burst resolved after ${r.failingResolvedMs} ms`,
        );
      }
  } finally {
    await pool.end();
    await owner.end();
  }
  const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[xs.length >> 1]!;
  const failingMs = median(sides.failing);
  const cleanMs = median(sides.clean);
  const delayMs = Math.max(0, failingMs - cleanMs);
  return {
    burst,
    healthy_groups: tasks,
    rounds,
    healthy_step_closed_ms: failingMs,
    baseline_clean_burst_ms: cleanMs,
    delay_ms: delayMs,
    failing_resolved_ms: median(sides.resolved),
    failing_records_dead_lettered_per_s: Math.round(burst / Math.max(0.001, median(sides.resolved) / 1000)),
    ratio: Math.round((failingMs / cleanMs) * 100) / 100,
  };
}
