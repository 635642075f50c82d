// Hash chain audit (`rods audit verify`): recomputes every stream's chain from the stored rows
// and compares it with the stored hashes and with the stream heads in `streams`. It reads in
// keyset pages of (stream_id, stream_version) inside one REPEATABLE READ READ ONLY transaction,
// so memory stays flat and concurrent appends cannot make a consistent store look broken.
//
// What it detects: an edited row (hash-mismatch: the recomputed hash differs), a re-hashed row
// (prev-hash-mismatch on the next event), a deleted row (version-gap, or missing-head when the
// deleted rows were the last of the stream), a stream head that disagrees with the last event
// (head-mismatch). What it cannot detect alone: someone with write access who rewrites a stream's
// whole tail and its head consistently; anchoring heads outside the database closes that.
import pg from 'pg';
import { canonicalEventJson, chainHash, GENESIS_HASH } from './canonical.js';
// For its side effect: bigint columns (positions, versions) parse as numbers.
import './db.js';

export type AuditProblem =
  | 'version-gap'
  | 'prev-hash-mismatch'
  | 'hash-mismatch'
  | 'missing-head'
  | 'head-mismatch';

export interface AuditOk {
  ok: true;
  /** Events checked. */
  events: number;
  /** Streams checked. */
  streams: number;
}

export interface AuditBroken {
  ok: false;
  /** Events checked before the broken link was found. */
  events: number;
  streamId: string;
  /** Version of the offending event (for missing-head: the version the head names). */
  version: number;
  /** Id of the offending event; null when it is the missing one. */
  eventId: string | null;
  position: number | null;
  problem: AuditProblem;
  detail: string;
}

export type AuditResult = AuditOk | AuditBroken;

export interface VerifyOptions {
  /** Only this stream. */
  streamId?: string;
  /** Only streams whose id starts with this. */
  streamPrefix?: string;
  /** Rows per page; default 2000. */
  pageSize?: number;
}

interface Row {
  position: number;
  stream_id: string;
  stream_version: number;
  event_id: string;
  type: string;
  fingerprint: string;
  payload: unknown;
  metadata: unknown;
  prev_hash: Buffer;
  hash: Buffer;
}

interface HeadRow {
  stream_id: string;
  version: number;
  last_hash: Buffer;
}

const COLUMNS =
  'position, stream_id, stream_version, event_id, type, fingerprint, payload, metadata, prev_hash, hash';

async function verifyIn(c: pg.ClientBase, opts: VerifyOptions): Promise<AuditResult> {
  const pageSize = opts.pageSize ?? 2000;
  let events = 0;
  let streams = 0;
  // The stream being walked: its last event.
  let cur: { streamId: string; version: number; hash: Buffer; eventId: string; position: number } | null =
    null;
  let heads = new Map<string, HeadRow>();

  const broken = (
    streamId: string,
    version: number,
    eventId: string | null,
    position: number | null,
    problem: AuditProblem,
    detail: string,
  ): AuditBroken => ({ ok: false, events, streamId, version, eventId, position, problem, detail });

  const finish = (s: NonNullable<typeof cur>): AuditBroken | null => {
    streams++;
    const head = heads.get(s.streamId);
    if (!head) {
      return broken(
        s.streamId,
        s.version,
        s.eventId,
        s.position,
        'head-mismatch',
        'the stream has events but no row in streams',
      );
    }
    if (head.version > s.version) {
      return broken(
        s.streamId,
        s.version + 1,
        null,
        null,
        'missing-head',
        `streams records version ${head.version} but the last stored event is version ${s.version}`,
      );
    }
    if (head.version < s.version) {
      return broken(
        s.streamId,
        s.version,
        s.eventId,
        s.position,
        'head-mismatch',
        `streams records version ${head.version} but events go up to version ${s.version}`,
      );
    }
    if (!head.last_hash.equals(s.hash)) {
      return broken(
        s.streamId,
        s.version,
        s.eventId,
        s.position,
        'head-mismatch',
        'the head hash in streams differs from the hash of the last event',
      );
    }
    return null;
  };

  for (;;) {
    const params: unknown[] = [];
    const where: string[] = [];
    if (opts.streamId !== undefined) {
      params.push(opts.streamId);
      where.push(`stream_id = $${params.length}`);
    }
    if (opts.streamPrefix !== undefined) {
      params.push(opts.streamPrefix);
      where.push(`starts_with(stream_id, $${params.length})`);
    }
    if (cur) {
      params.push(cur.streamId, cur.version);
      where.push(`(stream_id, stream_version) > ($${params.length - 1}, $${params.length})`);
    }
    params.push(pageSize);
    const { rows } = await c.query<Row>(
      `select ${COLUMNS} from events ${where.length ? `where ${where.join(' and ')}` : ''}
        order by stream_id, stream_version limit $${params.length}`,
      params,
    );
    if (rows.length === 0) break;
    const ids = [...new Set(rows.map((r) => r.stream_id))];
    const h = await c.query<HeadRow>(
      'select stream_id, version, last_hash from streams where stream_id = any($1)',
      [ids],
    );
    // Heads of this page's streams, plus the one of the stream carried over from the last page.
    const carried = cur ? heads.get(cur.streamId) : undefined;
    heads = new Map(h.rows.map((r) => [r.stream_id, r]));
    if (carried && !heads.has(carried.stream_id)) heads.set(carried.stream_id, carried);
    for (const r of rows) {
      const same: boolean = cur !== null && cur.streamId === r.stream_id;
      if (cur && !same) {
        const bad = finish(cur);
        if (bad) return bad;
      }
      const expectedVersion: number = same ? cur!.version + 1 : 1;
      if (r.stream_version !== expectedVersion) {
        return broken(
          r.stream_id,
          r.stream_version,
          r.event_id,
          r.position,
          'version-gap',
          `expected version ${expectedVersion}, found ${r.stream_version}: ${
            r.stream_version > expectedVersion ? 'events are missing' : 'versions go backwards'
          }`,
        );
      }
      const expectedPrev: Buffer = same ? cur!.hash : GENESIS_HASH;
      if (!r.prev_hash.equals(expectedPrev)) {
        return broken(
          r.stream_id,
          r.stream_version,
          r.event_id,
          r.position,
          'prev-hash-mismatch',
          `prev_hash ${r.prev_hash.toString('hex')} is not the hash of the previous event (${expectedPrev.toString('hex')})`,
        );
      }
      const canonical = canonicalEventJson({
        streamId: r.stream_id,
        version: r.stream_version,
        eventId: r.event_id,
        type: r.type,
        fingerprint: r.fingerprint,
        payload: r.payload,
        metadata: r.metadata,
      });
      const recomputed = chainHash(r.prev_hash, canonical);
      if (!recomputed.equals(r.hash)) {
        return broken(
          r.stream_id,
          r.stream_version,
          r.event_id,
          r.position,
          'hash-mismatch',
          `stored hash ${r.hash.toString('hex')} but the row hashes to ${recomputed.toString('hex')}: the event was altered`,
        );
      }
      events++;
      cur = {
        streamId: r.stream_id,
        version: r.stream_version,
        hash: r.hash,
        eventId: r.event_id,
        position: r.position,
      };
    }
    if (rows.length < pageSize) break;
  }
  if (cur) {
    const bad = finish(cur);
    if (bad) return bad;
  }

  // Streams whose head names events but that have none left.
  const params: unknown[] = [];
  let only = '';
  if (opts.streamId !== undefined) {
    params.push(opts.streamId);
    only += ` and s.stream_id = $${params.length}`;
  }
  if (opts.streamPrefix !== undefined) {
    params.push(opts.streamPrefix);
    only += ` and starts_with(s.stream_id, $${params.length})`;
  }
  const empty = await c.query<{ stream_id: string; version: number }>(
    `select s.stream_id, s.version from streams s
      where s.version > 0${only}
        and not exists (select 1 from events e where e.stream_id = s.stream_id)
      order by s.stream_id limit 1`,
    params,
  );
  const e = empty.rows[0];
  if (e) {
    return broken(
      e.stream_id,
      1,
      null,
      null,
      'missing-head',
      `streams records version ${e.version} but the stream has no events`,
    );
  }
  return { ok: true, events, streams };
}

/** Recomputes every hash chain (or one stream's) and returns the first broken link, if any. */
export async function verifyChains(
  db: pg.Pool | pg.PoolClient,
  opts: VerifyOptions = {},
): Promise<AuditResult> {
  const client = db instanceof pg.Pool ? await db.connect() : db;
  const own = client.getTransactionStatus() !== 'T';
  try {
    if (own) await client.query('begin isolation level repeatable read read only');
    const r = await verifyIn(client, opts);
    if (own) await client.query('commit');
    return r;
  } catch (e) {
    if (own) await client.query('rollback').catch(() => {});
    throw e;
  } finally {
    if (db instanceof pg.Pool) (client as pg.PoolClient).release();
  }
}
