import type { Command } from 'commander';
import { SimulatedTrainer } from '../../dev/simulator/trainer.js';
import { UsageError } from '../../entry/cli/errors.js';

export function register(program: Command): void {
  program
    .command('simulate-trainer')
    .description(
      'a SIMULATED GRPO trainer (latent skill per API class, latent task difficulty, K rollouts with progress rewards, learning that grows with reward variance) that talks to rods only through the gateway',
    )
    .requiredOption('--campaign <id>', 'campaign id (created beforehand, e.g. POST /v1/campaigns)')
    .option('--gateway <url>', 'gateway base URL', 'http://127.0.0.1:7500')
    .option(
      '--token <token>',
      'bearer token (default: first of RODS_GATEWAY_TOKENS)',
      process.env.RODS_GATEWAY_TOKENS?.split(',')[0],
    )
    .option('--steps <n>', 'training steps', (v) => Number.parseInt(v, 10), 30)
    .option('--from-step <n>', 'first step number', (v) => Number.parseInt(v, 10), 1)
    .option('--k <n>', 'rollouts per task (GRPO group size)', (v) => Number.parseInt(v, 10), 16)
    .option('--no-wait', 'do not wait for the campaign to plan each step')
    .option('--json', 'one JSON line per step')
    .action(
      async (opts: {
        campaign: string;
        gateway: string;
        token?: string;
        steps: number;
        fromStep: number;
        k: number;
        wait: boolean;
        json?: boolean;
      }) => {
        if (!opts.token) throw new UsageError('a bearer token is needed: --token or RODS_GATEWAY_TOKENS');
        const trainer = new SimulatedTrainer({
          gatewayUrl: opts.gateway.replace(/\/$/, ''),
          token: opts.token,
          campaignId: opts.campaign,
          k: opts.k,
        });
        for (let step = opts.fromStep; step < opts.fromStep + opts.steps; step++) {
          const r = await trainer.step(step);
          if (opts.wait) await trainer.waitPlanned(step);
          // One line per step, as --json promises (a reader takes them as they come).
          if (opts.json) console.log(JSON.stringify(r));
          else
            console.log(
              `step ${r.step}: ${r.groups} groups, pool v${r.poolVersion}, mean reward ${r.meanReward.toFixed(3)}, zero-variance groups ${r.zeroVarianceGroups}`,
            );
        }
      },
    );
}
