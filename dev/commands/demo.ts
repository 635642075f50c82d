import { existsSync } from 'node:fs';
import { type Command, Option } from 'commander';
import { DEMO_GENERATORS, type DemoGenerator, dashboardHint, runDemo } from '../../dev/demo/run.js';
import { ABLATION_SWITCHES, parseAblationSwitches } from '../../domain/ablation.js';
import { UsageError } from '../../entry/cli/errors.js';
import { printJson } from '../../entry/cli/output.js';
import { createPool } from '../../platform/store/db.js';
import { migrate } from '../../platform/store/migrate.js';

export function register(program: Command): void {
  program
    .command('demo')
    .description(
      "run the demo campaign: the real pipeline with the stand-in generator (or the stack's vLLM) and the SIMULATED trainer, then write a report (report.md, SVG charts, summary.json); the stack must be up (npm run demo does that)",
    )
    .addOption(
      new Option(
        '--generator <kind>',
        "the generator: standin (the rule-based stand-in), or vllm (the stack's vLLM, brought up as `npm run stack:up -- --services vllm` does, serving its tiny random model unless RODS_VLLM_MODEL names one; campaign dev/examples/campaign.vllm.json: few, short answers; the report says why its candidates were rejected)",
      )
        .choices(DEMO_GENERATORS)
        .default('standin'),
    )
    .option('--steps <n>', 'training steps (default 30; 6 with --generator vllm)', (v) =>
      Number.parseInt(v, 10),
    )
    .option(
      '--per-category <n>',
      'BFCL seeds per category (4 categories)',
      (v) => Number.parseInt(v, 10),
      100,
    )
    .option(
      '--out <dir>',
      'report folder (must not exist)',
      `reports/demo-${new Date().toISOString().replace(/[:.]/g, '-')}`,
    )
    .option(
      '--ablation <switches>',
      `comma-separated ablation switches for the campaign config: ${Object.entries(ABLATION_SWITCHES)
        .map(([k, v]) => `${k} (${v.what})`)
        .join('; ')}`,
    )
    .option(
      '--checkpoint-every <n>',
      'the simulated trainer saves and reports a checkpoint every n steps (rods manifest)',
      (v) => Number.parseInt(v, 10),
      10,
    )
    .option('--json', 'print the summary as JSON')
    .option(
      '--keep',
      'leave the gateway (its dashboard) running after the report; the stack stays up in any case',
    )
    .action(
      async (opts: {
        generator: DemoGenerator;
        steps?: number;
        perCategory: number;
        checkpointEvery: number;
        out: string;
        json?: boolean;
        ablation?: string;
        keep?: boolean;
      }) => {
        const steps = opts.steps ?? (opts.generator === 'vllm' ? 6 : 30);
        if (!(steps >= 1)) throw new UsageError('--steps must be >= 1');
        if (!(opts.checkpointEvery >= 1)) throw new UsageError('--checkpoint-every must be >= 1');
        if (!(opts.perCategory >= 1 && opts.perCategory <= 200))
          throw new UsageError('--per-category must be in 1..200');
        if (existsSync(opts.out)) throw new UsageError(`${opts.out} exists; choose another --out`);
        let ablation: Record<string, unknown> = {};
        try {
          ablation = parseAblationSwitches(opts.ablation ?? '');
        } catch (e) {
          throw new UsageError(`--ablation: ${(e as Error).message}`);
        }
        await migrate();
        const db = createPool({ application: 'rods-demo', max: 4 });
        try {
          const r = await runDemo(db, {
            steps,
            generator: opts.generator,
            perCategory: opts.perCategory,
            checkpointEvery: opts.checkpointEvery,
            out: opts.out,
            json: Boolean(opts.json),
            ablation,
            keep: Boolean(opts.keep),
          });
          if (opts.json) printJson({ out: r.out, ...r.summary, dashboard: r.dashboard });
          else {
            console.log(`report: ${r.out}/report.md`);
            if (r.dashboard.stopScript) {
              console.log(dashboardHint(r.dashboard));
              console.log(
                `the gateway (pid ${r.dashboard.gatewayPid}) and the stack keep running; stop the gateway with\n` +
                  `  sh ${r.dashboard.stopScript}\nand the stack with\n  npm run stack:down`,
              );
            }
          }
        } finally {
          await db.end();
        }
      },
    );
}
