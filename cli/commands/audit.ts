import type { Command } from 'commander';
import { verifyChains } from '../../store/audit.js';
import { createPool } from '../../store/db.js';
import { UsageError } from '../errors.js';
import { printJson } from '../output.js';

export function register(program: Command): void {
  const audit = program.command('audit').description('check the integrity of the event store');
  audit
    .command('verify')
    .description(
      "recompute every stream's hash chain (or some streams') and compare it with the stored hashes and stream heads; exit 1 on the first broken link",
    )
    .option('--stream <id>', 'check only this stream')
    .option('--prefix <text>', 'check only the streams whose id starts with this')
    .option('--page-size <n>', 'rows read per query (default 2000)', (v) => {
      const n = Number(v);
      if (!Number.isSafeInteger(n) || n < 1)
        throw new UsageError(`--page-size: expected a positive integer, got ${v}`);
      return n;
    })
    .option('--json', 'JSON output')
    .action(async (opts: { stream?: string; prefix?: string; pageSize?: number; json?: boolean }) => {
      const pool = createPool({ application: 'rods-audit', max: 1 });
      try {
        const r = await verifyChains(pool, {
          streamId: opts.stream,
          streamPrefix: opts.prefix,
          pageSize: opts.pageSize,
        });
        if (opts.json) printJson(r);
        else if (r.ok) {
          const scope =
            opts.stream !== undefined
              ? ` in stream ${opts.stream}${r.streams === 0 ? ' (no such stream)' : ''}`
              : ` in ${r.streams} streams`;
          console.log(`ok: ${r.events} events checked${scope}`);
        } else {
          console.log(
            `BROKEN: stream ${r.streamId} version ${r.version}` +
              `${r.eventId ? ` event ${r.eventId}` : ''}${r.position !== null ? ` (position ${r.position})` : ''}: ` +
              `${r.problem}: ${r.detail} (${r.events} events verified before it)`,
          );
        }
        if (!r.ok) process.exitCode = 1;
      } finally {
        await pool.end();
      }
    });
}
