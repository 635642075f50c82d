// `npm run bench -- NAME [--json] [...]`: runs one benchmark. Each benchmark measures the
// project's path and, in the same run, a baseline of the same work without the project's
// machinery, and prints one JSON object with its figures and the ratio between them.
import { Command } from 'commander';
import { loadSecretFiles } from '../../platform/config/secret-files.js';
import { BENCHES as benches } from './registry.js';

async function main(argv: string[]): Promise<void> {
  // As every rods process: DATABASE_URL_FILE and the like (the secured stack gives its URLs so).
  loadSecretFiles();
  const names = Object.keys(benches).sort();
  const program = new Command('bench')
    .description(`run one benchmark; available: ${names.join(', ') || '(none)'}`)
    .argument('<name>', 'benchmark name')
    .option('--json', 'print only the JSON result object')
    .allowUnknownOption(true)
    .allowExcessArguments(true)
    .action(async (name: string, opts: { json?: boolean }, cmd: Command) => {
      const bench = benches[name];
      if (!bench) {
        console.error(`unknown benchmark ${JSON.stringify(name)}; available: ${names.join(', ')}`);
        process.exitCode = 2;
        return;
      }
      const extra: Record<string, string | boolean> = {};
      const rest = cmd.args.slice(1);
      for (let i = 0; i < rest.length; i++) {
        const a = rest[i]!;
        if (!a.startsWith('--')) continue;
        // --name=value: the only way to pass a value that itself starts with "--".
        const eq = a.indexOf('=');
        if (eq > 2) {
          extra[a.slice(2, eq)] = a.slice(eq + 1);
          continue;
        }
        const next = rest[i + 1];
        if (next !== undefined && !next.startsWith('--')) {
          extra[a.slice(2)] = next;
          i++;
        } else extra[a.slice(2)] = true;
      }
      if (!opts.json) console.error(`bench ${name}: ${bench.describe}`);
      const fn = await bench.load();
      const result = await fn({ ...extra, json: Boolean(opts.json) });
      process.stdout.write(`${JSON.stringify(result)}\n`);
    });
  await program.parseAsync(argv);
}

main(process.argv).then(
  () => process.exit(process.exitCode ?? 0),
  (e: Error) => {
    console.error(e.stack ?? e.message);
    process.exit(1);
  },
);
