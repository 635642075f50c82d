import type { Command } from 'commander';
import { ensureTopics, TopicSettingsError, withAdmin } from '../../../platform/kafka/client.js';
import { topology } from '../../../platform/kafka/topology.js';
import { printJson } from '../output.js';

export function register(program: Command): void {
  const topics = program.command('topics').description("the project's Kafka topics");
  topics
    .command('ensure')
    .description(
      'create missing topics with explicit partitions, replication factor and retention (against any cluster)',
    )
    .option('--partitions <n>', 'partitions for task-keyed topics', (v) => Number.parseInt(v, 10))
    .option('--replication <n>', 'replication factor', (v) => Number.parseInt(v, 10))
    .option('--fix', 'set the retention and cleanup policy of existing topics to what replay needs')
    .option('--json', 'JSON output')
    .action(async (opts: { partitions?: number; replication?: number; fix?: boolean; json?: boolean }) => {
      const specs = topology({ partitions: opts.partitions, replicationFactor: opts.replication });
      let r: Awaited<ReturnType<typeof ensureTopics>>;
      try {
        r = await withAdmin((a) => ensureTopics(a, specs, { fix: opts.fix }));
      } catch (e) {
        if (!(e instanceof TopicSettingsError)) throw e;
        if (opts.json) printJson({ ok: false, problems: e.problems });
        else console.error(`rods topics ensure: ${e.message}`);
        process.exitCode = 1;
        return;
      }
      if (opts.json) printJson(r);
      else
        console.log(
          `created: ${r.created.join(', ') || '(none)'}\nexisting: ${r.existing.join(', ') || '(none)'}` +
            (r.fixed.length
              ? `\nfixed: ${r.fixed.map((f) => `${f.topic} ${f.setting}=${f.expected} (was ${f.actual})`).join(', ')}`
              : ''),
        );
    });
  topics
    .command('list')
    .description('print the topology the project expects')
    .option('--json', 'JSON output')
    .action((opts: { json?: boolean }) => {
      const specs = topology();
      if (opts.json) printJson(specs);
      else
        for (const s of specs)
          console.log(`${s.name.padEnd(20)} key=${s.key.padEnd(12)} partitions=${s.partitions}  ${s.doc}`);
    });
}
