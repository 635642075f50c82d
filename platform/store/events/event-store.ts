// The event store: an append-only PostgreSQL table of events in streams (migration
// 0002_event_store), with optimistic concurrency per stream, idempotent appends by event id, a
// sha256 hash chain per stream, and readers of the whole log that never skip an event whose
// transaction commits late.
//
// Appending. append() takes a transaction-scoped advisory lock on the stream id, then reads and
// updates the stream's row in `streams` (its version and last hash; created for a new stream),
// so appends to one stream are serialised and its versions (1, 2, 3 ...) and hash chain have no
// forks. It works inside the caller's transaction when given a PoolClient that is in one (state,
// events and consumed offsets then commit together); given a Pool, or a client outside a
// transaction, it runs its own. A refused append (ConcurrencyError, IdempotencyConflictError,
// InvalidEventError) has written nothing, so the caller's transaction stays usable.
//
// Immutability. A trigger refuses UPDATE, DELETE and TRUNCATE on events unless the session sets
// rods.allow_event_mutation = 'on' (use SET LOCAL inside a transaction; for maintenance such as
// removing test data, and for tamper tests playing a privileged attacker). Anyone who can write
// the table can do that, or disable the trigger: tampering is detected by the hash chain
// (platform/store/events/audit.ts, `rods audit verify`), not prevented by the trigger.
//
// Idempotency. Event ids are unique across the store. A batch whose event ids are all already
// stored in this stream is a no-op: it reports their existing positions, bumps nothing and skips
// the expected-version check (it is the retry of an append that committed). A batch mixing new
// and stored ids, or naming an id stored in another stream, is refused whole with
// IdempotencyConflictError: a retry must repeat the same batch, and anything else is a bug in the
// caller that should be loud rather than half-applied. Only the stream and event type of a stored
// id are compared with the retry, not its payload (the first write wins).
//
// Reading the log. Positions come from a sequence when rows are inserted, not when they commit,
// so a reader that just followed positions could pass position 10 while the transaction that
// holds it is still open and never come back. The readers therefore only return rows whose
// transaction id is older than the oldest transaction still running
// (transaction_id < pg_snapshot_xmin(pg_current_snapshot())), and walk the log in
// (transaction_id, position) order: every transaction that commits later has a larger id than
// anything already returned, so nothing is skipped. Within a transaction the order is the
// position order, and per stream it is the version order. That holds by construction for a
// transaction that appends before it writes anything else: it gets its transaction id only once
// it holds the stream's lock, after the previous appender committed. A transaction that wrote
// earlier already has an id, possibly older than the stream's last appender; append() then
// refuses with a retryable StreamOrderError rather than break the stream's order (so in a
// transaction that commits state + events + offsets, append first, write the rest after). Use
// READ COMMITTED transactions: the head is read after the lock is granted. A cursor is the pair
// (transactionId, position) of the last event processed; a bare position is resolved to its pair.
// Two consequences: a reader lags behind the oldest transaction with a write that is still open
// anywhere in the cluster, and a reader inside a transaction that has written cannot see past
// its own transaction id, so read outside such transactions. Two readers share these rules:
// readPage, one query per page (the relay, projection catch-up, subscriptions), and readLog, a
// whole history streamed by one binary COPY (replay, projection rebuilds).
import { setTimeout as sleep } from 'node:timers/promises';
import pg from 'pg';
import { to as copyTo } from 'pg-copy-streams';
import type { EventName, EventPayloads } from '../../../schemas/types.generated.js';
import { defaultRegistry, type SchemaRegistry } from '../../codec/registry.js';
import { CanonicalJsonError, canonicalEventJson, canonicalJson, chainHash } from './canonical.js';
import { EVENTS_COPY_COLUMNS, EventCopyParser } from './copy-binary.js';
// For its side effect: bigint columns (positions, versions) parse as numbers.
import '../db.js';
import { lockForTransaction } from '../locks.js';
import type { EventMetadata, RecordedEvent } from './recorded-event.js';

export type { EventMetadata, RecordedEvent };

/** Anything that runs queries: a pool (each call on some connection) or one client. */
export type Queryable = pg.Pool | pg.PoolClient | pg.Client;

/** A new event of a known type: its payload is that type's generated interface. */
export interface TypedNewEvent<N extends EventName> {
  /** UUID, chosen by the producer (deterministic ids make retries idempotent). */
  eventId: string;
  type: N;
  /** CRC-64-AVRO fingerprint of the writer schema, 16 hex digits. */
  fingerprint: string;
  payload: EventPayloads[N];
  metadata?: EventMetadata;
}

/**
 * A new event of a known type with one of the generated payloads: the write path takes nothing
 * else, so no payload reaches append as `unknown`. typedEvent builds one with its payload
 * checked against its own type's interface.
 */
export type NewEvent = TypedNewEvent<EventName>;

/**
 * A new event of type `type` (its id is the payload's, its fingerprint the type's current
 * schema's): the write path's typed constructor, so a payload that does not match its schema's
 * generated interface fails to compile instead of failing at append or at replay.
 */
export function typedEvent<N extends EventName>(
  type: N,
  payload: EventPayloads[N] & { eventId: string },
  metadata: EventMetadata = {},
  registry: SchemaRegistry = defaultRegistry(),
): TypedNewEvent<N> {
  const schema = registry.current(type);
  if (!schema) throw new Error(`no schema for event type ${type}`);
  return { eventId: payload.eventId, type, fingerprint: schema.fingerprint, payload, metadata };
}

/** Where a reader stands: the last event it has processed. The start is { '0', 0 }. */
export interface Cursor {
  transactionId: string;
  position: number;
}

export const START: Readonly<Cursor> = Object.freeze({ transactionId: '0', position: 0 });

/** A number (the version the stream must be at; 0 = does not exist yet), 'no-stream' or 'any'. */
export type ExpectedVersion = number | 'any' | 'no-stream';

export interface AppendResult {
  /** Global position of each event of the batch, in the batch's order. */
  positions: number[];
  /** The stream's version after the append: pass it as expectedVersion of the next append. */
  nextExpectedVersion: number;
  /** False when every event id was already stored (an idempotent no-op). */
  appended: boolean;
}

/** The stream is not at the expected version. Retryable after re-reading the stream. */
export class ConcurrencyError extends Error {
  override name = 'ConcurrencyError';
  readonly retryable = true;
  constructor(
    readonly streamId: string,
    readonly expected: ExpectedVersion,
    readonly actual: number,
    message?: string,
  ) {
    super(
      message ??
        `stream ${JSON.stringify(streamId)}: expected version ${String(expected)}, actual version ${actual === 0 ? '0 (no stream)' : actual}`,
    );
  }
}

/**
 * The stream's last append came from a transaction that is newer than the caller's (which took
 * its transaction id earlier and appended later). Appending would break the per-stream order of
 * the log readers; retry the whole transaction, which then gets a newer id.
 */
export class StreamOrderError extends ConcurrencyError {
  override name = 'StreamOrderError';
  constructor(streamId: string, expected: ExpectedVersion, actual: number) {
    super(
      streamId,
      expected,
      actual,
      `stream ${JSON.stringify(streamId)}: last appended by a newer transaction than this one; retry the transaction`,
    );
  }
}

/** A batch reuses stored event ids in a way that is not a plain retry (see the top of the file). */
export class IdempotencyConflictError extends Error {
  override name = 'IdempotencyConflictError';
  constructor(
    readonly streamId: string,
    readonly eventIds: string[],
    message: string,
  ) {
    super(message);
  }
}

/** The batch itself is malformed (bad id, fingerprint, type, or a payload jsonb cannot keep). */
export class InvalidEventError extends Error {
  override name = 'InvalidEventError';
}

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;
const FINGERPRINT = /^[0-9a-f]{16}$/;

interface PreparedEvent {
  eventId: string;
  type: string;
  fingerprint: string;
  payloadJson: string;
  metadataJson: string;
}

function prepare(streamId: string, events: NewEvent[]): PreparedEvent[] {
  if (typeof streamId !== 'string' || streamId.length < 1 || streamId.length > 512) {
    throw new InvalidEventError('stream id must be a string of 1 to 512 characters');
  }
  const seen = new Set<string>();
  return events.map((e, i) => {
    const where = `event ${i} of stream ${JSON.stringify(streamId)}`;
    const eventId = typeof e.eventId === 'string' ? e.eventId.toLowerCase() : '';
    if (!UUID.test(eventId))
      throw new InvalidEventError(`${where}: event id ${String(e.eventId)} is not a UUID`);
    if (seen.has(eventId))
      throw new InvalidEventError(`${where}: event id ${eventId} appears twice in the batch`);
    seen.add(eventId);
    const fingerprint = typeof e.fingerprint === 'string' ? e.fingerprint.toLowerCase() : '';
    if (!FINGERPRINT.test(fingerprint)) {
      throw new InvalidEventError(`${where}: fingerprint ${String(e.fingerprint)} is not 16 hex digits`);
    }
    if (typeof e.type !== 'string' || e.type.length < 1 || e.type.length > 256) {
      throw new InvalidEventError(`${where}: type must be a string of 1 to 256 characters`);
    }
    const metadata = e.metadata ?? {};
    if (typeof metadata !== 'object' || metadata === null || Array.isArray(metadata)) {
      throw new InvalidEventError(`${where}: metadata must be an object`);
    }
    try {
      return {
        eventId,
        type: e.type,
        fingerprint,
        payloadJson: canonicalJson(e.payload, '$.payload'),
        metadataJson: canonicalJson(metadata, '$.metadata'),
      };
    } catch (err) {
      if (err instanceof CanonicalJsonError) throw new InvalidEventError(`${where}: ${err.message}`);
      throw err;
    }
  });
}

interface Head {
  version: number;
  last_hash: Buffer;
  order_conflict: boolean;
}

// Serialises appends to one stream. An advisory lock (not a row lock, which would give the
// transaction an id while it waits) so that a fresh transaction gets its id only once it holds
// the lock, after the previous appender committed: its id is then newer, as the readers' order
// needs. The head is read in a separate statement, whose snapshot is taken after the wait.
async function lockStream(c: pg.ClientBase, streamId: string): Promise<Head | undefined> {
  await lockForTransaction(c, streamId);
  return readHead(c, streamId);
}

async function readHead(c: pg.ClientBase, streamId: string): Promise<Head | undefined> {
  const { rows } = await c.query<Head>(
    `select version, last_hash, last_transaction_id > pg_current_xact_id() as order_conflict
       from streams where stream_id = $1`,
    [streamId],
  );
  return rows[0];
}

async function appendLocked(
  c: pg.ClientBase,
  streamId: string,
  expected: ExpectedVersion,
  batch: PreparedEvent[],
): Promise<AppendResult> {
  let head = await lockStream(c, streamId);
  if (!head) {
    if (typeof expected === 'number' && expected !== 0) throw new ConcurrencyError(streamId, expected, 0);
    const ins = await c.query<Head>(
      `insert into streams (stream_id) values ($1) on conflict (stream_id) do nothing
       returning version, last_hash, false as order_conflict`,
      [streamId],
    );
    head = ins.rows[0] ?? (await readHead(c, streamId));
    if (!head) throw new Error(`stream ${streamId}: head row vanished while appending`);
  }

  // Idempotency: after the lock, so a concurrent append of the same batch is visible here.
  const ids = batch.map((e) => e.eventId);
  const stored = await c.query<{ event_id: string; stream_id: string; type: string; position: number }>(
    'select event_id, stream_id, type, position from events where event_id = any($1::uuid[])',
    [ids],
  );
  if (stored.rows.length > 0) {
    const byId = new Map(stored.rows.map((r) => [r.event_id, r]));
    const typeOf = new Map(batch.map((e) => [e.eventId, e.type]));
    const foreign = stored.rows.filter((r) => r.stream_id !== streamId || r.type !== typeOf.get(r.event_id));
    if (foreign.length > 0) {
      const f = foreign[0]!;
      throw new IdempotencyConflictError(
        streamId,
        foreign.map((r) => r.event_id),
        `event id ${f.event_id} is already stored as ${f.type} in stream ${JSON.stringify(f.stream_id)}`,
      );
    }
    if (stored.rows.length < batch.length) {
      throw new IdempotencyConflictError(
        streamId,
        stored.rows.map((r) => r.event_id),
        `stream ${JSON.stringify(streamId)}: batch mixes ${stored.rows.length} stored and ` +
          `${batch.length - stored.rows.length} new event ids; a retry must repeat the same batch`,
      );
    }
    return {
      positions: ids.map((id) => byId.get(id)!.position),
      nextExpectedVersion: head.version,
      appended: false,
    };
  }

  const actual = head.version;
  if ((expected === 'no-stream' && actual !== 0) || (typeof expected === 'number' && expected !== actual)) {
    throw new ConcurrencyError(streamId, expected, actual);
  }
  if (head.order_conflict) throw new StreamOrderError(streamId, expected, actual);

  const n = batch.length;
  const versions = new Array<number>(n);
  const prevHashes = new Array<string>(n);
  const hashes = new Array<string>(n);
  let prev = head.last_hash;
  for (let i = 0; i < n; i++) {
    const e = batch[i]!;
    const version = actual + i + 1;
    const canonical = canonicalEventJson(
      {
        streamId,
        version,
        eventId: e.eventId,
        type: e.type,
        fingerprint: e.fingerprint,
        payload: null,
        metadata: null,
      },
      e.payloadJson,
      e.metadataJson,
    );
    const hash = chainHash(prev, canonical);
    versions[i] = version;
    prevHashes[i] = prev.toString('hex');
    hashes[i] = hash.toString('hex');
    prev = hash;
  }
  const { rows } = await c.query<{ position: number }>(
    `with ins as (
       insert into events (stream_id, stream_version, event_id, type, fingerprint, payload, metadata, prev_hash, hash)
       select $1, u.v, u.id, u.t, u.f, u.p, u.m, decode(u.ph, 'hex'), decode(u.h, 'hex')
         from rows from (unnest($2::bigint[], $3::uuid[], $4::text[], $5::text[]),
                         jsonb_array_elements($6::jsonb), jsonb_array_elements($7::jsonb),
                         unnest($8::text[], $9::text[]))
              with ordinality as u(v, id, t, f, p, m, ph, h, ord)
        order by u.ord
       returning position, stream_version
     ), head as (
       update streams set version = $10, last_hash = decode($11, 'hex'),
              last_transaction_id = pg_current_xact_id(), updated_at = now()
        where stream_id = $1
     )
     select position from ins order by stream_version`,
    [
      streamId,
      versions,
      ids,
      batch.map((e) => e.type),
      batch.map((e) => e.fingerprint),
      // Payloads and metadata travel as one JSON array each: as jsonb[] the driver would escape
      // every quote of every document into an array literal (a tenth of an append's CPU).
      jsonArray(batch, 'payloadJson'),
      jsonArray(batch, 'metadataJson'),
      prevHashes,
      hashes,
      actual + n,
      prev.toString('hex'),
    ],
  );
  return { positions: rows.map((r) => r.position), nextExpectedVersion: actual + n, appended: true };
}

function jsonArray(batch: PreparedEvent[], field: 'payloadJson' | 'metadataJson'): string {
  let out = '[';
  for (let i = 0; i < batch.length; i++) out += (i === 0 ? '' : ',') + batch[i]![field];
  return `${out}]`;
}

function isPool(db: Queryable): db is pg.Pool {
  return db instanceof pg.Pool;
}

/**
 * Appends events to a stream (see the top of this file for concurrency and idempotency rules).
 * With a client inside a transaction the append joins that transaction; otherwise it runs in
 * its own.
 */
export async function append(
  db: Queryable,
  streamId: string,
  expectedVersion: ExpectedVersion,
  events: NewEvent[],
): Promise<AppendResult> {
  if (
    typeof expectedVersion === 'number' &&
    !(Number.isSafeInteger(expectedVersion) && expectedVersion >= 0)
  ) {
    throw new InvalidEventError(`expected version ${expectedVersion} is not a non-negative integer`);
  }
  const batch = prepare(streamId, events);
  if (batch.length === 0) {
    const { rows } = await db.query<{ version: number }>('select version from streams where stream_id = $1', [
      streamId,
    ]);
    const actual = rows[0]?.version ?? 0;
    if (
      (expectedVersion === 'no-stream' && actual !== 0) ||
      (typeof expectedVersion === 'number' && expectedVersion !== actual)
    ) {
      throw new ConcurrencyError(streamId, expectedVersion, actual);
    }
    return { positions: [], nextExpectedVersion: actual, appended: false };
  }
  const client = isPool(db) ? await db.connect() : db;
  try {
    const status = client.getTransactionStatus();
    if (status === 'T') {
      // Inside the caller's transaction: a savepoint-free append; a refusal is detected before
      // any write, so the transaction stays usable.
      return await appendLocked(client, streamId, expectedVersion, batch);
    }
    if (status === 'E') throw new Error('append: the client is in a failed transaction; roll it back first');
    await client.query('begin');
    try {
      const r = await appendLocked(client, streamId, expectedVersion, batch);
      await client.query('commit');
      return r;
    } catch (e) {
      await client.query('rollback').catch(() => {});
      throw e;
    }
  } finally {
    if (isPool(db)) (client as pg.PoolClient).release();
  }
}

// ---------------------------------------------------------------------------------------------
// Readers

// recorded_at travels as epoch milliseconds (int8; float8 arithmetic on a millisecond-truncated
// value, which rounds back to the exact integer) and becomes a Date here: cheaper on both ends
// than PostgreSQL's timestamp text and its parser. ORDER BY clauses below must name table
// columns that no output alias shadows (transaction_id is aliased "transactionId" for that).
/** The select list of a RecordedEvent (toEvents finishes the row). */
export const EVENT_COLUMNS = `position, transaction_id::text as "transactionId", stream_id as "streamId",
  stream_version as version, event_id as "eventId", type, fingerprint, payload, metadata,
  (date_part('epoch', date_trunc('milliseconds', recorded_at)) * 1000)::int8 as "recordedAt"`;

export type EventRow = Omit<RecordedEvent, 'recordedAt'> & { recordedAt: number | Date };

export function toEvents(rows: EventRow[]): RecordedEvent[] {
  for (const r of rows) r.recordedAt = new Date(r.recordedAt as number);
  return rows as RecordedEvent[];
}

/** Resolves a position to the cursor of the event stored there (0 is the start). */
export async function cursorAt(db: Queryable, position: number): Promise<Cursor> {
  if (position === 0) return { ...START };
  const { rows } = await db.query<{ transaction_id: string }>(
    'select transaction_id::text from events where position = $1',
    [position],
  );
  if (!rows[0])
    throw new Error(`no event at position ${position}; pass a cursor { transactionId, position }`);
  return { transactionId: rows[0].transaction_id, position };
}

/** The cursor of an event (to resume after it). */
export function cursorOf(e: Pick<RecordedEvent, 'transactionId' | 'position'>): Cursor {
  return { transactionId: e.transactionId, position: e.position };
}

/** a < b, = 0, > 0 in read order. */
export function compareCursors(a: Cursor, b: Cursor): number {
  const ta = BigInt(a.transactionId);
  const tb = BigInt(b.transactionId);
  if (ta !== tb) return ta < tb ? -1 : 1;
  return a.position - b.position;
}

async function toCursor(db: Queryable, after: number | Cursor | undefined): Promise<Cursor> {
  if (after === undefined) return { ...START };
  if (typeof after === 'number') return cursorAt(db, after);
  return after;
}

/** One page of the log after a cursor, in read order. */
export async function readPage(db: Queryable, after: Cursor, limit: number): Promise<RecordedEvent[]> {
  const { rows } = await db.query<EventRow>({
    text: `select ${EVENT_COLUMNS} from events
            where (transaction_id, position) > ($1::xid8, $2::bigint)
              and transaction_id < pg_snapshot_xmin(pg_current_snapshot())
            order by transaction_id, position
            limit $3`,
    values: [after.transactionId, after.position, limit],
  });
  return toEvents(rows);
}

export interface ReadAllOptions {
  /** Position or cursor of the last event already processed; default: the start. */
  after?: number | Cursor;
  /** Page size; default 1000. */
  limit?: number;
}

/** Events after `after` in read order (see the top of this file), at most `limit`. */
export async function readAll(db: Queryable, opts: ReadAllOptions = {}): Promise<RecordedEvent[]> {
  return readPage(db, await toCursor(db, opts.after), opts.limit ?? 1000);
}

export interface ReadLogOptions {
  /** Position or cursor of the last event already processed; default: the start. */
  after?: number | Cursor;
  /** Events per page yielded; default 1000. */
  pageSize?: number;
  /** Only the events whose payload.campaignId is this (a campaign's history). */
  campaignId?: string;
}

/**
 * The bulk reader: every event after `after` that a reader can see when the read starts (the
 * horizon and order of readPage), in pages of `pageSize`, streamed by one
 * `COPY (select ...) TO STDOUT (format binary)` on a connection of its own from the pool. For
 * whole-history reads (replay, projection rebuilds): one statement instead of a query per page,
 * PostgreSQL producing rows while the caller works on the previous page, and a binary format
 * whose fixed-width fields need no text parsing. The events are the ones readPage returns, equal
 * field by field. The statement's snapshot is held until the last page is consumed; leaving the
 * loop early closes that connection (a COPY cannot be stopped half way otherwise).
 */
export async function* readLog(pool: pg.Pool, opts: ReadLogOptions = {}): AsyncGenerator<RecordedEvent[]> {
  const pageSize = opts.pageSize ?? 1000;
  if (!(Number.isSafeInteger(pageSize) && pageSize > 0)) throw new Error(`page size ${pageSize}`);
  const after = await toCursor(pool, opts.after);
  // COPY takes no bind parameters: the cursor and the filter are checked or quoted literals.
  if (!/^\d{1,20}$/.test(after.transactionId) || !Number.isSafeInteger(after.position)) {
    throw new Error(`invalid cursor ${JSON.stringify(after)}`);
  }
  const filter =
    opts.campaignId === undefined ? '' : ` and payload->>'campaignId' = ${pg.escapeLiteral(opts.campaignId)}`;
  const sql = `copy (select ${EVENTS_COPY_COLUMNS} from events
                      where (transaction_id, position) > ('${after.transactionId}'::xid8, ${after.position}::bigint)
                        and transaction_id < pg_snapshot_xmin(pg_current_snapshot())${filter}
                      order by transaction_id, position) to stdout (format binary)`;
  const client = await pool.connect();
  let failure: Error | true | undefined = true;
  try {
    const parser = new EventCopyParser();
    let page: RecordedEvent[] = [];
    for await (const chunk of client.query(copyTo(sql))) {
      parser.push(chunk as Buffer, page);
      while (page.length >= pageSize) {
        const full = page.length === pageSize ? page : page.slice(0, pageSize);
        page = page.length === pageSize ? [] : page.slice(pageSize);
        yield full;
      }
    }
    parser.end();
    failure = undefined;
    if (page.length > 0) yield page;
  } catch (e) {
    failure = e as Error;
    throw e;
  } finally {
    // After an error or an early exit the connection is mid-COPY: close it rather than reuse it.
    client.release(failure);
  }
}

/** The cursor of the last event a reader can see now (to start a subscription "from now"). */
export async function headCursor(db: Queryable): Promise<Cursor> {
  const { rows } = await db.query<Cursor>(
    `select transaction_id::text as "transactionId", position from events
      where transaction_id < pg_snapshot_xmin(pg_current_snapshot())
      order by transaction_id desc, position desc limit 1`,
  );
  return rows[0] ?? { ...START };
}

/**
 * The cursor of the last event committed now, visible to readers or not yet (an older
 * transaction still open elsewhere hides it from readPage until that transaction ends).
 */
export async function committedHeadCursor(db: Queryable): Promise<Cursor> {
  const { rows } = await db.query<Cursor>(
    `select transaction_id::text as "transactionId", position from events
      order by transaction_id desc, position desc limit 1`,
  );
  return rows[0] ?? { ...START };
}

export interface SubscribeOptions {
  after?: number | Cursor;
  /** Events per query; default 1000. */
  batchSize?: number;
  /** Wait between polls once caught up; default 250 ms. */
  pollMs?: number;
  /** Ends the iteration (without an error). */
  signal?: AbortSignal;
}

/** Follows the log forever (until the signal aborts or the loop breaks), polling when caught up. */
export async function* subscribeAll(
  db: Queryable,
  opts: SubscribeOptions = {},
): AsyncGenerator<RecordedEvent> {
  const batchSize = opts.batchSize ?? 1000;
  const pollMs = opts.pollMs ?? 250;
  let cursor = await toCursor(db, opts.after);
  while (!opts.signal?.aborted) {
    const page = await readPage(db, cursor, batchSize);
    for (const e of page) {
      cursor = cursorOf(e);
      yield e;
      if (opts.signal?.aborted) return;
    }
    if (page.length < batchSize) {
      try {
        await sleep(pollMs, undefined, { signal: opts.signal });
      } catch {
        return;
      }
    }
  }
}

export interface ReadStreamOptions {
  /** First version to return; default 1. */
  fromVersion?: number;
  /** At most this many events; default all. */
  limit?: number;
}

/** A stream's events in version order. */
export async function readStream(
  db: Queryable,
  streamId: string,
  opts: ReadStreamOptions = {},
): Promise<RecordedEvent[]> {
  const { rows } = await db.query<EventRow>(
    `select ${EVENT_COLUMNS} from events
      where stream_id = $1 and stream_version >= $2
      order by stream_version
      limit $3`,
    [streamId, opts.fromVersion ?? 1, opts.limit ?? null],
  );
  return toEvents(rows);
}

/** A recorded event of type N, its payload typed by the generated schema types. */
export type TypedRecordedEvent<N extends EventName> = {
  [K in N]: Omit<RecordedEvent, 'type' | 'payload'> & { type: K; payload: EventPayloads[K] };
}[N];

/** A stream's events of the given types, in version order, with typed payloads. */
export async function readStreamOf<N extends EventName>(
  db: Queryable,
  streamId: string,
  types: readonly N[],
): Promise<TypedRecordedEvent<N>[]> {
  const { rows } = await db.query<EventRow>(
    `select ${EVENT_COLUMNS} from events where stream_id = $1 and type = any($2::text[]) order by stream_version`,
    [streamId, types],
  );
  return toEvents(rows) as TypedRecordedEvent<N>[];
}

/**
 * A campaign's events of the given types in log order (transaction id, then position), with
 * typed payloads; `taskIds` keeps only those whose payload names one of these tasks.
 */
export async function readCampaignEventsOf<N extends EventName>(
  db: Queryable,
  campaignId: string,
  types: readonly N[],
  opts: { taskIds?: readonly string[] } = {},
): Promise<TypedRecordedEvent<N>[]> {
  const { rows } = await db.query<EventRow>(
    `select ${EVENT_COLUMNS} from events
      where payload->>'campaignId' = $1 and type = any($2::text[])
        and ($3::text[] is null or payload->>'taskId' = any($3::text[]))
      order by transaction_id, position`,
    [campaignId, types, opts.taskIds ?? null],
  );
  return toEvents(rows) as TypedRecordedEvent<N>[];
}

/** The cursor of the campaign's newest event (undefined: none). */
export async function campaignHeadCursor(db: Queryable, campaignId: string): Promise<Cursor | undefined> {
  const { rows } = await db.query<{ transactionId: string; position: number }>(
    `select transaction_id::text as "transactionId", position from events where payload->>'campaignId' = $1
      order by transaction_id desc, position desc limit 1`,
    [campaignId],
  );
  return rows[0];
}

/** The stream's current version (0 when it does not exist). */
export async function streamVersion(db: Queryable, streamId: string): Promise<number> {
  const { rows } = await db.query<{ version: number }>('select version from streams where stream_id = $1', [
    streamId,
  ]);
  return rows[0]?.version ?? 0;
}

/**
 * How many events were committed after the cursor (the reader's order: transaction id, then
 * position), counted up to `cap`, and when the oldest of them was recorded; those still hidden
 * from a reader behind an older open transaction count too.
 */
export async function countAfter(
  db: Queryable,
  cursor: Cursor,
  cap: number,
): Promise<{ n: number; oldestAt: Date | null }> {
  const { rows } = await db.query<{ n: string; oldest: Date | null }>(
    `select count(*) as n, min(recorded_at) as oldest from (
       select recorded_at from events where (transaction_id, position) > ($1::xid8, $2::bigint)
        order by transaction_id, position limit $3) e`,
    [cursor.transactionId, cursor.position, cap],
  );
  return { n: Number(rows[0]?.n ?? 0), oldestAt: rows[0]?.oldest ?? null };
}

/** How many of a campaign's events were committed after the cursor, counted up to `cap`. */
export async function countCampaignAfter(
  db: Queryable,
  campaignId: string,
  cursor: Cursor,
  cap: number,
): Promise<number> {
  const { rows } = await db.query<{ n: string }>(
    `select count(*) as n from (
       select 1 from events where payload ->> 'campaignId' = $3
          and (transaction_id, position) > ($1::xid8, $2::bigint) limit $4) e`,
    [cursor.transactionId, cursor.position, campaignId, cap],
  );
  return Number(rows[0]?.n ?? 0);
}
