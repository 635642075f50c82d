// The relay's metrics on the registry `rods relay --metrics-port` serves (platform/util/metrics.ts):
// events relayed, dead letters, transactions and their duration, session restarts, and the lag
// to the store's committed head, read from PostgreSQL at each scrape.
import type pg from 'pg';
import client from 'prom-client';
import { type Cursor, countAfter } from '../../platform/store/events/event-store.js';
import type { RelayOptions } from './relay.js';

/** The lag is counted up to this many events (a count over a huge backlog would be slow). */
export const LAG_COUNT_CAP = 100_000;

export function relayMetrics(
  registry: client.Registry,
  db: pg.Pool,
  cursor: () => Cursor,
): Required<Pick<RelayOptions, 'onCommit' | 'onRestart'>> {
  const events = new client.Counter({
    name: 'rods_relay_events_total',
    help: 'event-store events published to Kafka, by how (record, or reference for one too large)',
    labelNames: ['as'],
    registers: [registry],
  });
  const dead = new client.Counter({
    name: 'rods_relay_dead_letters_total',
    help: 'events that could not be encoded, sent to the dead-letter topic',
    registers: [registry],
  });
  const transactions = new client.Histogram({
    name: 'rods_relay_transaction_seconds',
    help: 'time to publish one page of events in one Kafka transaction (read, send, commit)',
    buckets: [0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10],
    registers: [registry],
  });
  const restarts = new client.Counter({
    name: 'rods_relay_session_restarts_total',
    help: 'failures (Kafka away, a fenced session) that restarted the Kafka session',
    registers: [registry],
  });
  new client.Gauge({
    name: 'rods_relay_cursor_position',
    help: 'global position of the last event the relay committed',
    registers: [registry],
    collect() {
      this.set(cursor().position);
    },
  });
  let pending: Promise<{ n: number; oldest: number | null } | undefined> | undefined;
  const lag = () => {
    pending ??= readLag(db, cursor()).finally(() => {
      pending = undefined;
    });
    return pending;
  };
  new client.Gauge({
    name: 'rods_relay_lag_events',
    help: `committed events not yet published (counted up to ${LAG_COUNT_CAP})`,
    registers: [registry],
    async collect() {
      const r = await lag();
      if (r) this.set(r.n);
    },
  });
  new client.Gauge({
    name: 'rods_relay_lag_seconds',
    help: 'age of the oldest committed event not yet published (0 when caught up)',
    registers: [registry],
    async collect() {
      const r = await lag();
      if (r) this.set(r.oldest === null ? 0 : Math.max(0, (Date.now() - r.oldest) / 1000));
    },
  });
  return {
    onCommit: (info) => {
      events.inc({ as: 'record' }, info.events - info.deadLettered - info.referenced);
      events.inc({ as: 'reference' }, info.referenced);
      dead.inc(info.deadLettered);
      transactions.observe(info.seconds);
    },
    onRestart: () => restarts.inc(),
  };
}

/**
 * Events committed after the cursor (the reader's order: transaction id, then position), those
 * still hidden from the relay behind an older open transaction included.
 */
async function readLag(db: pg.Pool, c: Cursor): Promise<{ n: number; oldest: number | null } | undefined> {
  try {
    const r = await countAfter(db, c, LAG_COUNT_CAP);
    return { n: r.n, oldest: r.oldestAt?.getTime() ?? null };
  } catch {
    return undefined; // PostgreSQL away: the gauges keep their last values
  }
}
