import type { Command } from 'commander';
import { down, status, up } from '../../infra/stack/cli.js';
import { printJson } from '../output.js';

export function register(program: Command): void {
  const stack = program
    .command('stack')
    .description('manage the local stack (same as npm run stack:up|down|status)');
  stack
    .command('up')
    .description('install, start and wait for PostgreSQL, Kafka and Temporal')
    .action(() => up());
  stack
    .command('down')
    .description('stop the processes `up` started')
    .action(() => down());
  stack
    .command('status')
    .description('probe each service; exit 1 if any does not answer')
    .option('--json', 'JSON output')
    .action(async (opts: { json?: boolean }) => {
      const rows = await status();
      if (opts.json) printJson(rows);
      else
        for (const r of rows)
          console.log(
            `${r.service.padEnd(9)} ${r.answering ? 'answering' : 'DOWN'.padEnd(9)} ${r.endpoint}  ${r.detail}`,
          );
      if (rows.some((r) => !r.answering)) process.exitCode = 1;
    });
}
