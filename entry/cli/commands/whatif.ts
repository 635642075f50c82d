import type { Command } from 'commander';
import { WhatIfError, type WhatIfOverrides, whatIf } from '../../../analysis/replay/whatif.js';
import { createPool } from '../../../platform/store/db.js';
import { UsageError } from '../errors.js';
import { printJson } from '../output.js';

const unit = (name: string) => (v: string) => {
  const n = Number(v);
  if (!Number.isFinite(n) || n < 0 || n > 1)
    throw new UsageError(`${name} must be a number in [0, 1], got ${JSON.stringify(v)}`);
  return n;
};

const count = (name: string, min: number) => (v: string) => {
  const n = Number(v);
  if (!Number.isSafeInteger(n) || n < min)
    throw new UsageError(`${name} must be an integer >= ${min}, got ${v}`);
  return n;
};

export function register(program: Command): void {
  program
    .command('whatif')
    .description(
      "re-run the band detector and the pool policy (the live campaign's pure domain code) over the campaign's recorded reward stream under other thresholds, and compare selections, retirements and injections with what happened",
    )
    .requiredOption('--campaign <id>', 'campaign id')
    .option('--low <x>', 'hard/boundary threshold', unit('--low'))
    .option('--high <x>', 'boundary/mastered threshold', unit('--high'))
    .option('--retire <x>', 'retire mastered tasks above this', unit('--retire'))
    .option('--budget <n>', 'seeds per step (M)', count('--budget', 0))
    .option('--window <w>', 'detector window: latest | ewma:ALPHA | last:K')
    .option(
      '--variance-guard <mode>',
      "seeds whose latest group was flat: skip | rank (by measured variance) | off (pure φ, the paper's)",
      (v) => {
        if (v !== 'skip' && v !== 'rank' && v !== 'off')
          throw new UsageError(`--variance-guard must be skip, rank or off, got ${JSON.stringify(v)}`);
        return v;
      },
    )
    .option(
      '--min-groups <n>',
      'reward groups a task needs before it may be a seed',
      count('--min-groups', 1),
    )
    .option(
      '--max-stale <n>',
      'steps after which statistics are too old to select on (0: never)',
      count('--max-stale', 0),
    )
    .option('--topic <topic>', 'the reward topic the trainer wrote', 'rods.rewards.v1')
    .option('--json', 'JSON report')
    .action(
      async (
        opts: Omit<WhatIfOverrides, 'maxStaleSteps'> & {
          campaign: string;
          maxStale?: number;
          topic: string;
          json?: boolean;
        },
      ) => {
        if (opts.low !== undefined && opts.high !== undefined && opts.low > opts.high)
          throw new UsageError('--low must not exceed --high');
        const db = createPool({ application: 'rods-whatif', max: 2, limits: { statementTimeoutMs: 0 } });
        try {
          const r = await whatIf(db, {
            campaignId: opts.campaign,
            topic: opts.topic,
            overrides: {
              low: opts.low,
              high: opts.high,
              retire: opts.retire,
              budget: opts.budget,
              window: opts.window,
              varianceGuard: opts.varianceGuard,
              minGroups: opts.minGroups,
              maxStaleSteps: opts.maxStale,
            },
          });
          if (opts.json) printJson(r);
          else {
            console.log(`what-if for ${r.campaignId}: ${JSON.stringify(r.config)}`);
            console.log('step  selected (what-if/actual/jaccard)  retired  injected');
            for (const s of r.steps) {
              const f = (d: { whatif: number; actual: number; jaccard: number }) =>
                `${d.whatif}/${d.actual}/${d.jaccard.toFixed(2)}`;
              console.log(
                `${String(s.step).padStart(4)}  ${f(s.selected).padEnd(32)} ${f(s.retired).padEnd(8)} ${f(s.injected)}`,
              );
            }
            for (const k of ['selected', 'retired', 'injected'] as const) {
              const t = r.totals[k];
              console.log(
                `total ${k}: what-if ${t.whatif}, actual ${t.actual}, mean jaccard ${t.meanJaccard.toFixed(3)}`,
              );
            }
            console.log(
              r.reproduced
                ? 'reproduces the recorded decisions exactly'
                : 'differs from the recorded decisions',
            );
            if (r.lateGroups > 0)
              console.log(
                `${r.lateGroups} reward groups were read after their step was decided (published late, or a partition far behind): folded at the next step`,
              );
            console.log(`limits: ${r.limits}`);
          }
        } catch (e) {
          if (e instanceof WhatIfError) throw new UsageError(e.message);
          throw e;
        } finally {
          await db.end();
        }
      },
    );
}
