// `rods partitions`: what holds the aggregator's partitions, and the one way past a record an
// aggregator cannot get past (never an UPDATE of aggregator_offsets by hand).
import type { Command } from 'commander';
import { openKafka } from '../../../platform/kafka/client.js';
import { REWARDS_TOPIC } from '../../../platform/kafka/topology.js';
import { stuckHeads } from '../../../platform/store/aggregator/suspects.js';
import { createPool } from '../../../platform/store/db.js';
import { SkipRefused, skipRecord } from '../../../stages/aggregator/skip-record.js';
import { UsageError } from '../errors.js';
import { intOption } from '../options.js';
import { printJson } from '../output.js';

export function register(program: Command): void {
  const partitions = program
    .command('partitions')
    .description(
      "the aggregator's partitions: which do not move, and moving one past the record it holds on",
    );
  partitions
    .command('stuck')
    .description(
      'partitions whose head has not moved: a range a process died in (or hangs on), or a record that keeps failing',
    )
    .option('--group <id>', "the aggregators' consumer group", 'rods-aggregator')
    .option(
      '--older-than <sec>',
      'an uncommitted range counts once older than this',
      intOption('--older-than'),
      60,
    )
    .option('--json', 'JSON array of {topic, partition, offset, reason, since}')
    .action(async (opts: { group: string; olderThan: number; json?: boolean }) => {
      const pool = createPool({ application: 'rods-cli', max: 1 });
      try {
        const heads = await stuckHeads(pool, opts.group, opts.olderThan);
        if (opts.json) printJson(heads);
        else if (heads.length === 0) console.log(`no partition of group ${opts.group} is held on a record`);
        else
          for (const h of heads)
            console.log(
              `${h.topic}/${h.partition} at offset ${h.offset} since ${h.since}: ${h.reason}\n  move past it: rods partitions skip --topic ${h.topic} --partition ${h.partition} --offset ${h.offset} --reason "..."`,
            );
      } finally {
        await pool.end();
      }
    });
  partitions
    .command('skip')
    .description(
      'move a partition past the record at its head: a dead letter (operator-skipped, original bytes kept) and a DeadLettered event, its group counted as rejected for its step',
    )
    .requiredOption('--partition <n>', 'partition', intOption('--partition'))
    .requiredOption('--offset <n>', 'offset of the record at the head of the partition')
    .requiredOption('--reason <text>', 'why (kept with the dead letter and the event)')
    .option('--topic <name>', 'rewards topic', REWARDS_TOPIC)
    .option('--group <id>', "the aggregators' consumer group", 'rods-aggregator')
    .option('--actor <name>', 'who skips it', process.env.USER)
    .option('--json', 'JSON output')
    .action(
      async (opts: {
        partition: number;
        offset: string;
        reason: string;
        topic: string;
        group: string;
        actor?: string;
        json?: boolean;
      }) => {
        const pool = createPool({ application: 'rods-cli', max: 2 });
        const producer = await openKafka({ clientId: 'rods-partitions' }).producer({ idempotent: true });
        try {
          const r = await skipRecord(pool, producer, {
            groupId: opts.group,
            topic: opts.topic,
            partition: opts.partition,
            offset: opts.offset,
            reason: opts.reason,
            actor: opts.actor,
          });
          if (opts.json) printJson(r);
          else
            console.log(
              `skipped ${r.topic}/${r.partition} offset ${r.offset} (${r.bytes} bytes${r.group ? `, campaign ${r.group.campaignId} step ${r.group.step} task ${r.group.taskId}` : ''}); the partition resumes at ${r.nextOffset}; event ${r.eventId}`,
            );
        } catch (e) {
          if (e instanceof SkipRefused) throw new UsageError(e.message);
          throw e;
        } finally {
          await producer.disconnect().catch(() => {});
          await pool.end();
        }
      },
    );
}
