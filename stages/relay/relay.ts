// The outbox relay: publishes every event of the PostgreSQL event store to Kafka exactly once,
// in log order (so in stream order per key), and nothing that is not stored.
//
// How exactly-once holds across crashes. The relay reads committed events in the store's read
// order (see platform/store/events/event-store.ts) and publishes each page in ONE Kafka transaction together with
// its own cursor, committed as the group offset of a consumer group named after the relay on the
// never-written topic rods.relay-checkpoints.v1 (offset = position + 1, metadata = the cursor).
// Records and cursor therefore become visible together or not at all. On start the transactional
// producer's InitProducerId fences any older instance with the same transactional id and lets the
// coordinator finish or abort its open transaction; only then is the cursor read back, so it is
// exactly the cursor of the last committed page. A PostgreSQL advisory lock keeps a standby relay
// waiting instead of fencing the active one back and forth.
//
// An event that cannot be encoded (no published schema with its fingerprint, or a payload that
// does not match it) is not dropped: it goes to rods.dlq.v1 with the reason, in the same
// transaction, and the relay moves on. An event too large for a Kafka record (maxRecordBytes,
// platform/kafka/topology.ts) is published as an EventReferenced record in its place: stream, version,
// position, size and SHA-256, the body staying in the event store. Sends are cut so that no
// partition's batch is over the limit either, and a broker that refuses a size anyway (a topic
// with a lower limit) halves the relay's limit for the next try. No event stops the relay.
//
// A lost PostgreSQL connection (a restart, an outage) is waited out: reading the page is retried
// with backoff, and when the lock's connection is gone the lock is taken again and the session
// reopened (another relay may have led meanwhile) before anything more is published. Any other
// failure (Kafka away, a fenced session) reopens the session with backoff, for as long as it takes.
import { createHash } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import type pg from 'pg';
import { EncodeError } from '../../platform/codec/errors.js';
import { defaultRegistry, type SchemaRegistry } from '../../platform/codec/registry.js';
import {
  type OutgoingRecord,
  openKafka,
  RecordTooLargeError,
  type TransactionalProducer,
} from '../../platform/kafka/client.js';
import { deadLetter } from '../../platform/kafka/dlq.js';
import { relayCheckpoint, relayGroup } from '../../platform/kafka/relay-checkpoint.js';
import {
  DECISIONS_TOPIC,
  MIN_RECORD_BYTES,
  maxRecordBytes,
  RELAY_CHECKPOINT_TOPIC,
  TASK_STATS_TOPIC,
} from '../../platform/kafka/topology.js';
import {
  backoffMs,
  databaseStatus,
  isConnectionError,
  retryOnConnectionLoss,
} from '../../platform/store/db.js';
import {
  type Cursor,
  committedHeadCursor,
  compareCursors,
  cursorOf,
  type RecordedEvent,
  readPage,
  START,
} from '../../platform/store/events/event-store.js';
import { lockForSession, unlockSession } from '../../platform/store/locks.js';

export interface Route {
  topic: string;
  key: string;
}

/** Where a stored event goes on Kafka: task statistics by task, everything else by campaign. */
export function defaultRoute(e: RecordedEvent): Route {
  const p = (e.payload ?? {}) as Record<string, unknown>;
  if (e.type === 'TaskStatsUpdated' && typeof p.taskId === 'string') {
    return { topic: TASK_STATS_TOPIC, key: `${String(p.campaignId ?? '')}/${p.taskId}` };
  }
  return { topic: DECISIONS_TOPIC, key: typeof p.campaignId === 'string' ? p.campaignId : e.streamId };
}

export interface RelayOptions {
  /** Names the relay's transactional id, checkpoint group and lock; default "main". */
  name?: string;
  /** Events per transaction; default 500. */
  batchSize?: number;
  /** Wait between polls when caught up; default 200 ms. */
  pollMs?: number;
  route?: (e: RecordedEvent) => Route;
  registry?: SchemaRegistry;
  /** Publish only events of streams whose id starts with this (the cursor still passes the others). */
  streamPrefix?: string;
  /** Where to start when the relay has no checkpoint yet; default the start of the log. */
  startAfter?: Cursor;
  /** Called after each committed page (for progress and tests). */
  onCommit?: (info: {
    cursor: Cursor;
    events: number;
    deadLettered: number;
    referenced: number;
    /** From reading the page to the commit. */
    seconds: number;
  }) => void;
  /** Called when a failure restarts the session (for metrics). */
  onRestart?: (error: Error) => void;
  /** The largest record sent (key, value, headers); default maxRecordBytes() (platform/kafka/topology.ts). */
  maxRecordBytes?: number;
  /** How long a lowered record limit stays (default RECORD_LIMIT_RETRY_MS). */
  recordLimitRetryMs?: number;
  now?: () => number;
}

export interface RelayStats {
  /** Events published, as themselves or as an EventReferenced record. */
  published: number;
  deadLettered: number;
  /** Events too large for a record, published as EventReferenced. */
  referenced: number;
  transactions: number;
  cursor: Cursor;
  /** The record size limit in force: lowered when the broker refuses a size, back up after RECORD_LIMIT_RETRY_MS. */
  recordLimit: number;
  /** The last failure that restarted the session, until a page commits again. */
  lastError?: string;
}

/** How long a lowered record limit stays before the configured one is tried again (the broker's may have risen). */
export const RECORD_LIMIT_RETRY_MS = 10 * 60_000;

const HEADER = {
  position: 'rods-position',
  stream: 'rods-stream',
  version: 'rods-stream-version',
  eventId: 'rods-event-id',
  type: 'rods-event-type',
  /** "1" on an EventReferenced record standing in for the event. */
  referenced: 'rods-referenced',
} as const;

// Batch header and per-record framing: what a record costs beyond its key, value and headers.
const RECORD_OVERHEAD = 96;
const BATCH_OVERHEAD = 128;

function recordBytes(r: OutgoingRecord): number {
  const len = (x: Buffer | string | null | undefined) =>
    x == null ? 0 : typeof x === 'string' ? Buffer.byteLength(x) : x.length;
  let n = RECORD_OVERHEAD + len(r.key) + len(r.value);
  for (const [k, v] of Object.entries(r.headers ?? {})) n += Buffer.byteLength(k) + len(v) + 8;
  return n;
}

/** Consecutive runs of records, each under `limit` bytes in all (one send, one batch a partition). */
function chunks(records: OutgoingRecord[], limit: number): OutgoingRecord[][] {
  const out: OutgoingRecord[][] = [];
  let chunk: OutgoingRecord[] = [];
  let size = BATCH_OVERHEAD;
  for (const r of records) {
    const n = recordBytes(r);
    if (chunk.length > 0 && size + n > limit) {
      out.push(chunk);
      chunk = [];
      size = BATCH_OVERHEAD;
    }
    chunk.push(r);
    size += n;
  }
  if (chunk.length > 0) out.push(chunk);
  return out;
}

export const headerNames = HEADER;

export class Relay {
  private readonly name: string;
  private readonly batchSize: number;
  private readonly pollMs: number;
  private readonly route: (e: RecordedEvent) => Route;
  private readonly registry: SchemaRegistry;
  private producer?: TransactionalProducer;
  private lockClient?: pg.PoolClient;
  /** Set when the lock's connection dies: the advisory lock went with it. */
  private lockLost = false;
  private readonly onLockError = (err: Error) => {
    this.lockLost = true;
    databaseStatus(this.pool).lost(err);
  };
  private stopping = false;
  /** The record size limit configured, and when the one in force was last lowered from it. */
  private readonly configuredLimit: number;
  private loweredAt: number | undefined;
  readonly stats: RelayStats = {
    published: 0,
    deadLettered: 0,
    referenced: 0,
    transactions: 0,
    cursor: { ...START },
    recordLimit: 0,
  };

  private get recordLimit(): number {
    return this.stats.recordLimit;
  }

  private set recordLimit(v: number) {
    this.stats.recordLimit = v;
  }

  constructor(
    private readonly pool: pg.Pool,
    private readonly opts: RelayOptions = {},
  ) {
    this.name = opts.name ?? 'main';
    this.batchSize = opts.batchSize ?? 500;
    this.pollMs = opts.pollMs ?? 200;
    this.route = opts.route ?? defaultRoute;
    this.registry = opts.registry ?? defaultRegistry();
    this.configuredLimit = Math.max(MIN_RECORD_BYTES, opts.maxRecordBytes ?? maxRecordBytes());
    this.recordLimit = this.configuredLimit;
  }

  /** Takes the leadership lock, fences older instances and reads the committed cursor. */
  async start(): Promise<Cursor> {
    await this.takeLock();
    return this.openSession();
  }

  /** Takes the leadership lock on a dedicated connection, retrying while the database is away. */
  private async takeLock(signal?: AbortSignal): Promise<void> {
    this.dropLockClient();
    await retryOnConnectionLoss(
      this.pool,
      async () => {
        const c = await this.pool.connect();
        c.on('error', this.onLockError);
        try {
          await lockForSession(c, `rods-relay:${this.name}`);
        } catch (e) {
          c.off('error', this.onLockError);
          c.release(e as Error);
          throw e;
        }
        this.lockClient = c;
        this.lockLost = false;
      },
      { signal, shouldStop: () => this.stopping },
    );
  }

  private dropLockClient(): void {
    const c = this.lockClient;
    if (!c) return;
    this.lockClient = undefined;
    c.off('error', this.onLockError);
    c.release(new Error('relay lock connection lost'));
  }

  /**
   * A new transactional producer: its InitProducerId fences any older instance and lets the
   * coordinator finish or abort the open transaction; only then is the committed cursor read.
   */
  private async openSession(): Promise<Cursor> {
    this.producer = undefined;
    const k = openKafka({ clientId: `rods-relay-${this.name}` });
    this.producer = await k.transactionalProducer({
      transactionalId: `rods-relay-${this.name}`,
      transactionTimeoutMs: 60_000,
    });
    const admin = await k.admin();
    try {
      const committed = await relayCheckpoint(admin, this.name);
      this.stats.cursor =
        committed.position === 0 && this.opts.startAfter ? { ...this.opts.startAfter } : committed;
    } finally {
      await admin.disconnect();
    }
    return this.stats.cursor;
  }

  /** Publishes one page after the cursor in one transaction; returns how many events it carried. */
  async step(): Promise<number> {
    if (!this.producer) throw new Error('relay not started');
    const t0 = performance.now();
    const page = await readPage(this.pool, this.stats.cursor, this.batchSize);
    if (page.length === 0) return 0;
    const tx = await this.producer.transaction();
    const limit = this.recordLimit;
    let dead = 0;
    let referenced = 0;
    try {
      const byTopic = new Map<string, OutgoingRecord[]>();
      for (const e of page) {
        if (this.opts.streamPrefix && !e.streamId.startsWith(this.opts.streamPrefix)) continue;
        let value: Buffer;
        try {
          value = this.registry.encodeWith(e.fingerprint, e.payload);
        } catch (err) {
          if (!(err instanceof EncodeError)) throw err;
          dead++;
          await deadLetter(
            tx,
            {
              reason: `event store position ${e.position} (${e.type}, stream ${e.streamId} v${e.version}): ${err.message}`,
              code: `relay-${err.code}`,
              topic: 'event-store',
              partition: 0,
              offset: String(e.position),
              key: Buffer.from(e.streamId),
              value: Buffer.from(JSON.stringify({ eventId: e.eventId, type: e.type, payload: e.payload })),
            },
            { registry: this.registry, maxRecordBytes: limit },
          );
          continue;
        }
        const r = this.route(e);
        const headers: Record<string, string> = {
          [HEADER.position]: String(e.position),
          [HEADER.stream]: e.streamId,
          [HEADER.version]: String(e.version),
          [HEADER.eventId]: e.eventId,
          [HEADER.type]: e.type,
        };
        let record: OutgoingRecord = { key: r.key, value, headers };
        if (recordBytes(record) + BATCH_OVERHEAD > limit) {
          referenced++;
          record = {
            key: r.key,
            value: this.reference(e, value),
            headers: { ...headers, [HEADER.referenced]: '1' },
          };
        }
        const list = byTopic.get(r.topic) ?? [];
        list.push(record);
        byTopic.set(r.topic, list);
      }
      for (const [topic, records] of byTopic) {
        for (const chunk of chunks(records, limit)) await tx.send(topic, chunk);
      }
      const last = cursorOf(page[page.length - 1]!);
      await tx.sendOffsets(relayGroup(this.name), [
        {
          topic: RELAY_CHECKPOINT_TOPIC,
          partition: 0,
          offset: String(last.position + 1),
          metadata: JSON.stringify(last),
        },
      ]);
      await tx.commit();
      this.stats.cursor = last;
    } catch (err) {
      await tx.abort().catch(() => {});
      throw err;
    }
    this.stats.published += page.length - dead;
    this.stats.deadLettered += dead;
    this.stats.referenced += referenced;
    this.stats.transactions++;
    this.opts.onCommit?.({
      cursor: this.stats.cursor,
      events: page.length,
      deadLettered: dead,
      referenced,
      seconds: (performance.now() - t0) / 1000,
    });
    return page.length;
  }

  /** The EventReferenced record that stands in for an event too large to publish. */
  private reference(e: RecordedEvent, value: Buffer): Buffer {
    const p = (e.payload ?? {}) as Record<string, unknown>;
    return this.registry.encode('EventReferenced', {
      eventId: e.eventId,
      campaignId: typeof p.campaignId === 'string' ? p.campaignId : '',
      eventType: e.type,
      fingerprint: e.fingerprint,
      streamId: e.streamId,
      streamVersion: e.version,
      position: e.position,
      valueBytes: value.length,
      valueSha256: createHash('sha256').update(value).digest('hex'),
      occurredAt: e.recordedAt.getTime(),
    });
  }

  /**
   * Relays until stopped (or, with untilCaughtUp, until every event committed when run() was
   * called is published: an empty page alone is not enough, since a transaction still open
   * anywhere hides the events committed after it began). A failed page
   * (e.g. the coordinator still finishing a fenced instance's transaction, Kafka away) restarts
   * the session with backoff: nothing of the page is visible, and the cursor is read back from
   * Kafka, so nothing is lost or published twice. It keeps trying for as long as it takes
   * (maxRestarts, for callers that want to give up: consecutive failures before rethrowing).
   * Takes the lock and opens the session itself when start() was not called.
   */
  async run(
    opts: { untilCaughtUp?: boolean; signal?: AbortSignal; maxRestarts?: number } = {},
  ): Promise<RelayStats> {
    let restarts = 0;
    let dbFailures = 0;
    const stopped = () => this.stopping || opts.signal?.aborted === true;
    const target = opts.untilCaughtUp ? await committedHeadCursor(this.pool) : undefined;
    while (!stopped()) {
      let n: number;
      try {
        if (this.lockLost || !this.lockClient) {
          // Lead again only under the lock, then fence whoever led meanwhile and re-read the cursor.
          await this.takeLock(opts.signal);
          await this.producer?.disconnect().catch(() => {});
          this.producer = undefined;
        }
        if (!this.producer) await this.openSession();
        n = await this.step();
        // A lowered limit is not kept for ever: the configured one is tried again now and then.
        const now = (this.opts.now ?? Date.now)();
        if (
          this.loweredAt !== undefined &&
          now - this.loweredAt >= (this.opts.recordLimitRetryMs ?? RECORD_LIMIT_RETRY_MS)
        ) {
          this.recordLimit = this.configuredLimit;
          this.loweredAt = undefined;
        }
        restarts = 0;
        dbFailures = 0;
        this.stats.lastError = undefined;
        databaseStatus(this.pool).restored();
      } catch (e) {
        if (stopped()) break;
        // Reading the page (or taking the lock) failed on the database: wait and try again.
        if (isConnectionError(e) && this.producer) {
          databaseStatus(this.pool).lost(e);
          await sleep(backoffMs(dbFailures++), undefined, { signal: opts.signal }).catch(() => {});
          continue;
        }
        if (e instanceof RecordTooLargeError && this.recordLimit > MIN_RECORD_BYTES) {
          // The topic takes less than assumed: smaller records (and references) next time.
          this.recordLimit = Math.max(MIN_RECORD_BYTES, Math.floor(this.recordLimit / 2));
          this.loweredAt = (this.opts.now ?? Date.now)();
        }
        restarts++;
        this.opts.onRestart?.(e as Error);
        if (opts.maxRestarts !== undefined && restarts > opts.maxRestarts) throw e;
        this.stats.lastError = (e as Error).message;
        process.stderr.write(
          `relay ${this.name}: ${(e as Error).message}; restarting the session (${restarts}, record limit ${this.recordLimit} bytes)\n`,
        );
        await this.producer?.disconnect().catch(() => {});
        this.producer = undefined;
        await sleep(Math.min(30_000, 200 * 2 ** Math.min(restarts, 8)), undefined, {
          signal: opts.signal,
        }).catch(() => {});
        continue;
      }
      if (n === 0) {
        if (target && compareCursors(this.stats.cursor, target) >= 0) break;
        await sleep(this.pollMs, undefined, { signal: opts.signal }).catch(() => {});
      }
    }
    return this.stats;
  }

  async stop(): Promise<void> {
    this.stopping = true;
    await this.producer?.disconnect().catch(() => {});
    const c = this.lockClient;
    if (c) {
      this.lockClient = undefined;
      await unlockSession(c).catch(() => {});
      c.off('error', this.onLockError);
      c.release(this.lockLost ? new Error('relay lock connection lost') : undefined);
    }
  }
}
