import type { Command } from 'commander';
import { migrate } from '../../../platform/store/migrate.js';
import { printJson } from '../output.js';

export function register(program: Command): void {
  program
    .command('migrate')
    .description(
      "apply pending PostgreSQL migrations (platform/store/migrations) as the owner role (RODS_MIGRATE_DATABASE_URL; the local stack's rods_owner) and grant DATABASE_URL's role its privileges",
    )
    .option('--json', 'JSON output')
    .action(async (opts: { json?: boolean }) => {
      const r = await migrate();
      if (opts.json) printJson(r);
      else console.log(r.applied.length ? `applied: ${r.applied.join(', ')}` : 'schema up to date');
    });
}
