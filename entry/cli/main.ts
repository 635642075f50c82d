// `rods` — the command-line entry point. Each command lives in its own module under
// entry/cli/commands and registers itself on the program here. Development commands (the demo, the
// simulated trainer and experiment, the stand-in generator) are not part of it: `npm run dev`
// (dev/cli.ts) carries them; the local stack is `npm run stack:up|down|status`.
import { Command, CommanderError } from 'commander';
import { ConfigError } from '../../platform/config/endpoints.js';
import { loadSecretFiles } from '../../platform/config/secret-files.js';
import { installNodeSha256 } from '../../platform/util/node-sha256.js';
import { register as aggregatorCommand } from './commands/aggregator.js';
import { register as auditCommand } from './commands/audit.js';
import { register as campaignCommand } from './commands/campaign.js';
import { register as contaminationCommand } from './commands/contamination.js';
import { register as doctorCommand } from './commands/doctor.js';
import { register as evalCommand } from './commands/eval.js';
import { register as exportCommand } from './commands/export.js';
import { register as gatewayCommand } from './commands/gateway.js';
import { register as lineageCommand } from './commands/lineage.js';
import { register as manifestCommand } from './commands/manifest.js';
import { register as migrateCommand } from './commands/migrate.js';
import { register as partitionsCommand } from './commands/partitions.js';
import { register as relayCommand } from './commands/relay.js';
import { register as replayCommand } from './commands/replay.js';
import { register as schemasCommand } from './commands/schemas.js';
import { register as topicsCommand } from './commands/topics.js';
import { register as whatifCommand } from './commands/whatif.js';
import { register as workerCommand } from './commands/worker.js';
import { describeUnreachable, UsageError, unreachableService } from './errors.js';

export function program(): Command {
  const p = new Command('rods')
    .description(
      'Control plane for reward-driven online data synthesis (RODS): keeps a GRPO training pool at the ' +
        "policy's capability boundary. Endpoints come from DATABASE_URL, KAFKA_BROKERS, TEMPORAL_ADDRESS, " +
        'TEMPORAL_NAMESPACE (defaults: the local stack on 127.0.0.1).',
    )
    .version(process.env.npm_package_version ?? '0.1.0')
    .showHelpAfterError('(run with --help for usage)')
    .exitOverride();
  for (const reg of [
    topicsCommand,
    migrateCommand,
    doctorCommand,
    schemasCommand,
    auditCommand,
    relayCommand,
    aggregatorCommand,
    partitionsCommand,
    campaignCommand,
    replayCommand,
    whatifCommand,
    workerCommand,
    gatewayCommand,
    lineageCommand,
    contaminationCommand,
    manifestCommand,
    evalCommand,
    exportCommand,
  ])
    reg(p);
  return p;
}

export async function main(argv: string[]): Promise<void> {
  await run(program(), argv);
}

/**
 * Runs a command program: exit code 2 for a usage or config error, 1 for a failure, each said in
 * one line (a service that does not answer: which, where, which variable sets it, how to start it).
 */
export async function run(p: Command, argv: string[]): Promise<void> {
  installNodeSha256();
  const name = p.name();
  // A reader that stops early (`| head`) closes the pipe: that ends the output, not in a crash.
  process.stdout.on('error', (e: NodeJS.ErrnoException) => {
    if (e.code !== 'EPIPE') throw e;
    process.exit(process.exitCode ?? 0);
  });
  try {
    loadSecretFiles(); // NAME_FILE secrets, before any command reads its settings
    await p.parseAsync(argv);
  } catch (e) {
    if (e instanceof CommanderError) {
      process.exitCode = e.exitCode === 0 ? 0 : 2;
      return;
    }
    if (e instanceof UsageError || e instanceof ConfigError) {
      console.error(`${name}: ${e.message}`);
      process.exitCode = 2;
      return;
    }
    // A service that does not answer: say which, where, which variable sets it and how to start it.
    const down = unreachableService(e);
    console.error(`${name}: ${down ? describeUnreachable(down) : (e as Error).message}`);
    if (process.env.RODS_DEBUG) console.error((e as Error).stack);
    process.exitCode = 1;
  }
}
