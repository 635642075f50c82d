import { existsSync, readdirSync, readFileSync } from 'node:fs';
import cliProgress from 'cli-progress';
import type { Command } from 'commander';
import {
  CONFIG_POLICY,
  DEFAULT_POLICIES,
  type ExperimentResult,
  POLICY_SPECS,
  runExperiment,
  runSweep,
  type SweepResult,
  sweepPoints,
} from '../../dev/simulator/experiment.js';
import { PARAMETERS } from '../../dev/simulator/parameters.js';
import { fmtInterval, resultTable, sweepTable, writeReport } from '../../dev/simulator/report.js';
import { parseAblationSwitches } from '../../domain/ablation.js';
import { type CampaignConfigInput, parseCampaignConfig } from '../../domain/campaign-config.js';
import { UsageError } from '../../entry/cli/errors.js';
import { intOption, positiveInt } from '../../entry/cli/options.js';
import { printJson } from '../../entry/cli/output.js';

const KNOWN = [...Object.keys(POLICY_SPECS), CONFIG_POLICY];

export function parsePolicies(v: string): string[] {
  const names = v
    .split(',')
    .map((s) => s.trim())
    .filter((s) => s !== '');
  if (names.length === 0) throw new UsageError(`--policies needs at least one of ${KNOWN.join(', ')}`);
  const out: string[] = [];
  for (const n of names) {
    if (!KNOWN.includes(n))
      throw new UsageError(`--policies: unknown policy ${JSON.stringify(n)}; expected ${KNOWN.join(', ')}`);
    if (!out.includes(n)) out.push(n);
  }
  return out;
}

/** A campaign config file (the `rods campaign create` form: config keys at the top level). */
export function readConfigFile(file: string): CampaignConfigInput {
  let raw: unknown;
  try {
    raw = JSON.parse(readFileSync(file, 'utf8'));
  } catch (e) {
    throw new UsageError(`--config ${file}: ${(e as Error).message}`);
  }
  if (typeof raw !== 'object' || raw === null || Array.isArray(raw))
    throw new UsageError(`--config ${file}: a JSON object is needed`);
  try {
    parseCampaignConfig(raw as CampaignConfigInput);
  } catch (e) {
    throw new UsageError(`--config ${file}: ${(e as Error).message}`);
  }
  return raw as CampaignConfigInput;
}

interface Opts {
  policies?: string[];
  seeds: number;
  firstSeed: number;
  steps: number;
  perCategory: number;
  batch: number;
  config?: string;
  ablation?: string;
  sweep?: boolean;
  out?: string;
  json?: boolean;
}

export function register(program: Command): void {
  program
    .command('experiment')
    .description(
      'a SIMULATED comparison of pool policies (dev/simulator, no services): the simulated GRPO trainer trained at equal rollouts under each policy, each a campaign config ablation run through the live step decider; held-out success with 95% intervals over seeds, zero-variance and boundary shares',
    )
    .option(
      '--policies <list>',
      `comma-separated: ${KNOWN.join(', ')} (config: the --config file's ablation) (default: ${DEFAULT_POLICIES.join(',')}, plus config with --config or --ablation)`,
      parsePolicies,
    )
    .option(
      '--seeds <n>',
      'independent runs per policy (seeds first-seed, first-seed+1, ...)',
      positiveInt('--seeds'),
      10,
    )
    .option('--first-seed <n>', 'first seed', intOption('--first-seed'), 1)
    .option('--steps <n>', 'training steps per run', positiveInt('--steps'), PARAMETERS.steps)
    .option(
      '--per-category <n>',
      'seed tasks per category, and as many held out',
      positiveInt('--per-category'),
      PARAMETERS.trainPerCategory,
    )
    .option('--batch <n>', 'tasks sampled per step (B)', positiveInt('--batch'), PARAMETERS.batchTasks)
    .option(
      '--config <file.json>',
      'campaign config: thresholds for every policy; its ablation is policy `config`',
    )
    .option(
      '--ablation <switches>',
      'ablation switches for policy `config`, over --config (e.g. judge-off,rewrite-off)',
    )
    .option('--sweep', 'also run the sensitivity sweep over three key parameters')
    .option('--out <dir>', 'write report.md, SVG charts and result.json into this new folder')
    .option('--json', 'print the result as JSON (no progress bar)')
    .action((opts: Opts) => {
      if (opts.out && existsSync(opts.out) && readdirSync(opts.out).length > 0)
        throw new UsageError(`--out ${opts.out} exists and is not empty`);
      const config: CampaignConfigInput = opts.config ? readConfigFile(opts.config) : {};
      if (opts.ablation) {
        let switches: Record<string, unknown>;
        try {
          switches = parseAblationSwitches(opts.ablation);
        } catch (e) {
          throw new UsageError(`--ablation: ${(e as Error).message}`);
        }
        (config as { ablation?: unknown }).ablation = {
          ...((config as { ablation?: object }).ablation ?? {}),
          ...switches,
        };
      }
      const withConfig = opts.config !== undefined || opts.ablation !== undefined;
      const policies = opts.policies ?? [...DEFAULT_POLICIES, ...(withConfig ? [CONFIG_POLICY] : [])];
      if (policies.includes(CONFIG_POLICY) && !withConfig)
        throw new UsageError('policy config needs --config <file.json> or --ablation <switches>');
      const params = {
        trainPerCategory: opts.perCategory,
        heldOutPerCategory: opts.perCategory,
        batchTasks: opts.batch,
        steps: opts.steps,
      };
      const bar = opts.json
        ? undefined
        : new cliProgress.SingleBar(
            {
              format: '{phase} {bar} {value}/{total} runs | {duration}s',
              stream: process.stderr,
              hideCursor: true,
              // Off a terminal (CI logs), a line every 10 s.
              noTTYOutput: true,
              notTTYSchedule: 10_000,
            },
            cliProgress.Presets.shades_classic,
          );
      const t0 = Date.now();
      const common = {
        policies,
        seeds: opts.seeds,
        firstSeed: opts.firstSeed,
        steps: opts.steps,
        params,
        config,
      };
      bar?.start(policies.length * opts.seeds, 0, { phase: 'experiment' });
      const result: ExperimentResult = runExperiment({ ...common, onRun: (d) => bar?.update(d) });
      bar?.stop();
      let sweep: SweepResult[] | undefined;
      if (opts.sweep) {
        bar?.start(sweepPoints().length * policies.length * opts.seeds, 0, { phase: 'sweep' });
        sweep = runSweep({ ...common, onRun: (d) => bar?.update(d) });
        bar?.stop();
      }
      const seconds = (Date.now() - t0) / 1000;
      if (opts.out) writeReport(opts.out, result, sweep);
      if (opts.json) {
        printJson({ ...result, ...(sweep ? { sweep } : {}), seconds });
        return;
      }
      console.log(
        `SIMULATED (dev/simulator): ${result.steps} steps x ${result.params.batchTasks} tasks x K=${result.k}, ${result.seeds.length} seeds per policy, ${seconds.toFixed(1)} s`,
      );
      console.log(resultTable(result));
      for (const p of result.policies)
        console.log(`  ${p.policy}: held-out ${fmtInterval(p.heldOutStart)} at step 0; ${p.what}`);
      if (sweep) {
        console.log('\nSensitivity sweep (other parameters at their defaults):');
        console.log(sweepTable(sweep));
      }
      if (opts.out) console.log(`\nreport: ${opts.out}/report.md`);
    });
}
