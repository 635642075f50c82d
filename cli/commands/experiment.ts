import type { Command } from 'commander';
import {
  DEFAULT_LEARNING_RATE,
  type ExperimentPolicy,
  isExperimentPolicy,
  POLICIES,
  type PolicyResult,
  runExperiment,
} from '../../dev/simulator/experiment.js';
import { UsageError } from '../errors.js';
import { printJson } from '../output.js';

function positiveInt(flag: string) {
  return (v: string): number => {
    const n = Number(v);
    if (!Number.isSafeInteger(n) || n < 1)
      throw new UsageError(`${flag} must be a positive integer, got ${v}`);
    return n;
  };
}

function parsePolicies(v: string): ExperimentPolicy[] {
  const names = v
    .split(',')
    .map((s) => s.trim())
    .filter((s) => s !== '');
  if (names.length === 0) throw new UsageError(`--policies needs at least one of ${POLICIES.join(', ')}`);
  const out: ExperimentPolicy[] = [];
  for (const n of names) {
    if (!isExperimentPolicy(n))
      throw new UsageError(
        `--policies: unknown policy ${JSON.stringify(n)}; expected ${POLICIES.join(', ')}`,
      );
    if (!out.includes(n)) out.push(n);
  }
  return out;
}

function row(cells: string[], widths: number[]): string {
  return cells.map((c, i) => (i === 0 ? c.padEnd(widths[i]!) : c.padStart(widths[i]!))).join('  ');
}

export function register(program: Command): void {
  program
    .command('experiment')
    .description(
      'a SIMULATED ablation (dev/simulator/model.ts, no services): train the simulated policy for N steps under each pool policy on the same synthetic BFCL-like seed tasks, through the same pure pool code as the live pipeline, and compare skill gained per 1,000 rollouts and the share of zero-variance groups',
    )
    .option('--policies <list>', `comma-separated: ${POLICIES.join(', ')}`, parsePolicies, [...POLICIES])
    .option('--steps <n>', 'training steps', positiveInt('--steps'), 30)
    .option(
      '--seeds-per-category <n>',
      'seed tasks per category (4 categories)',
      positiveInt('--seeds-per-category'),
      100,
    )
    .option(
      '--seed <n>',
      'seed of the seed tasks, rollouts and random draws',
      (v) => {
        const n = Number(v);
        if (!Number.isSafeInteger(n) || n < 0)
          throw new UsageError(`--seed must be a non-negative integer, got ${v}`);
        return n;
      },
      1,
    )
    .option(
      '--learning-rate <x>',
      'per-group learning rate of the simulated policy',
      (v) => {
        const x = Number(v);
        if (!(Number.isFinite(x) && x > 0 && x <= 1))
          throw new UsageError(`--learning-rate must be in (0, 1], got ${v}`);
        return x;
      },
      DEFAULT_LEARNING_RATE,
    )
    .option('--json', 'JSON report: an object keyed by policy')
    .action(
      (opts: {
        policies: ExperimentPolicy[];
        steps: number;
        seedsPerCategory: number;
        seed: number;
        learningRate: number;
        json?: boolean;
      }) => {
        const report = runExperiment({
          policies: opts.policies,
          steps: opts.steps,
          seedsPerCategory: opts.seedsPerCategory,
          seed: opts.seed,
          learningRate: opts.learningRate,
        });
        if (opts.json) {
          const out: Record<string, Omit<PolicyResult, 'finalPool'>> = {};
          for (const p of opts.policies) {
            const { finalPool: _, ...r } = report[p]!;
            out[p] = r;
          }
          printJson(out);
          return;
        }
        console.log(
          `SIMULATED: ${opts.steps} steps, ${4 * opts.seedsPerCategory} seed tasks, K=16, seed ${opts.seed}, learning rate ${opts.learningRate}`,
        );
        const head = ['policy', 'rollouts', 'skill/1k', 'zero-var', 'pool', 'generated', 'retired', 'skill'];
        const widths = [12, 9, 9, 9, 5, 9, 7, 13];
        console.log(row(head, widths));
        for (const p of opts.policies) {
          const r = report[p]!;
          console.log(
            row(
              [
                p,
                String(r.rollouts),
                r.skillGainPer1kRollouts.toFixed(5),
                `${(100 * r.zeroVarianceShare).toFixed(1)}%`,
                String(r.finalPoolSize),
                String(r.generated),
                String(r.retired.mastered + r.retired.burnIn),
                `${r.skillStart.toFixed(3)}→${r.skillEnd.toFixed(3)}`,
              ],
              widths,
            ),
          );
        }
      },
    );
}
