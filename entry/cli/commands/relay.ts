import type { Command } from 'commander';
import { DECISIONS_TOPIC } from '../../../platform/kafka/topology.js';
import { createPool } from '../../../platform/store/db.js';
import type { Cursor } from '../../../platform/store/events/event-store.js';
import { processRegistry, serveMetrics } from '../../../platform/util/metrics.js';
import { anchorIntervalMs, runPeriodicAnchor } from '../../../stages/relay/anchor.js';
import { relayMetrics } from '../../../stages/relay/metrics.js';
import { defaultRoute, Relay } from '../../../stages/relay/relay.js';
import { UsageError } from '../errors.js';
import { minutesOption, portOption } from '../options.js';
import { printJson } from '../output.js';

function parseCursor(v: string): Cursor {
  const m = /^(\d+):(\d+)$/.exec(v);
  if (!m) throw new UsageError(`--start-after expects TRANSACTION_ID:POSITION, got ${JSON.stringify(v)}`);
  return { transactionId: m[1]!, position: Number(m[2]) };
}

export function register(program: Command): void {
  program
    .command('relay')
    .description(
      'publish every event-store event to Kafka exactly once, in log order (Kafka transactions carrying the relay cursor); runs until SIGTERM',
    )
    .option('--name <name>', 'relay name: its transactional id, checkpoint group and lock', 'main')
    .option('--batch-size <n>', 'events per Kafka transaction', (v) => Number.parseInt(v, 10), 500)
    .option('--poll-ms <n>', 'wait between polls once caught up', (v) => Number.parseInt(v, 10), 200)
    .option(
      '--topic <topic>',
      `send every event to this topic instead of the default routes (${DECISIONS_TOPIC}, ...)`,
    )
    .option(
      '--start-after <cursor>',
      'TRANSACTION_ID:POSITION to start after when the relay has no checkpoint yet',
      parseCursor,
    )
    .option('--stream-prefix <prefix>', 'publish only the events of streams whose id starts with this')
    .option('--until-caught-up', 'exit once a page comes back empty')
    .option(
      '--anchor-minutes <m>',
      'record and publish an audit anchor this often when the store moved (RODS_AUDIT_ANCHOR_MINUTES, default 10; 0: never)',
      minutesOption('--anchor-minutes'),
    )
    .option(
      '--metrics-port <port>',
      'serve Prometheus metrics (events relayed, dead letters, lag to the committed head) on 127.0.0.1:PORT/metrics',
      portOption('--metrics-port'),
    )
    .option('--json', 'print the final stats as JSON')
    .action(
      async (opts: {
        name: string;
        batchSize: number;
        pollMs: number;
        topic?: string;
        startAfter?: Cursor;
        streamPrefix?: string;
        untilCaughtUp?: boolean;
        anchorMinutes?: number;
        metricsPort?: number;
        json?: boolean;
      }) => {
        if (!(opts.batchSize > 0)) throw new UsageError('--batch-size must be a positive integer');
        const pool = createPool({ application: `rods-relay-${opts.name}`, max: 3 });
        const topic = opts.topic;
        const metrics = opts.metricsPort !== undefined ? processRegistry() : undefined;
        const relay: Relay = new Relay(pool, {
          ...(metrics ? relayMetrics(metrics, pool, () => relay.stats.cursor) : {}),
          name: opts.name,
          batchSize: opts.batchSize,
          pollMs: opts.pollMs,
          startAfter: opts.startAfter,
          streamPrefix: opts.streamPrefix,
          route: topic ? (e) => ({ topic, key: defaultRoute(e).key }) : defaultRoute,
        });
        const metricsServer = metrics
          ? await serveMetrics({ registry: metrics, port: opts.metricsPort! })
          : undefined;
        const ac = new AbortController();
        const onSignal = () => ac.abort();
        process.once('SIGTERM', onSignal);
        process.once('SIGINT', onSignal);
        // A running campaign is anchored without an operator (platform/store/events/audit.ts, stages/relay/anchor.ts).
        const anchorMs =
          opts.anchorMinutes !== undefined ? Math.round(opts.anchorMinutes * 60_000) : anchorIntervalMs();
        const anchoring =
          anchorMs > 0 && !opts.untilCaughtUp
            ? runPeriodicAnchor(pool, { intervalMs: anchorMs, signal: ac.signal })
            : Promise.resolve();
        try {
          // run() takes the lock and opens the session itself, retrying while Kafka or the database is away.
          const stats = await relay.run({ untilCaughtUp: opts.untilCaughtUp, signal: ac.signal });
          if (opts.json) printJson(stats);
          else
            console.error(
              `relay ${opts.name}: ${stats.published} published (${stats.referenced} as references), ${stats.deadLettered} dead-lettered, cursor ${stats.cursor.position}`,
            );
        } finally {
          ac.abort();
          await anchoring;
          await relay.stop();
          await metricsServer?.close();
          await pool.end();
        }
      },
    );
}
