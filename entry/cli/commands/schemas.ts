import type { Command } from 'commander';
import { listSchemas } from '../../../platform/codec/registry.js';
import { printJson } from '../output.js';

export function register(program: Command): void {
  program
    .command('schemas')
    .description(
      'list every published event schema version: full name, version, CRC-64-AVRO fingerprint ' +
        '(16 hex digits, wire order), current or retired, file',
    )
    .option('--json', 'JSON output')
    .action((opts: { json?: boolean }) => {
      const rows = listSchemas().map((s) => ({
        fullName: s.fullName,
        version: s.version,
        fingerprint: s.fingerprint,
        status: s.current ? 'current' : 'retired',
        file: s.file,
      }));
      if (opts.json) {
        printJson(rows);
        return;
      }
      const width = Math.max(...rows.map((r) => r.fullName.length));
      for (const r of rows) {
        console.log(
          `${r.fullName.padEnd(width)}  v${String(r.version).padEnd(3)} ${r.fingerprint}  ${r.status.padEnd(7)}  ${r.file}`,
        );
      }
    });
}
