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
//
// Anchors (recordAnchor, verifyAnchor): a digest over every stream's head (id, version, hash of
// that event) and the global position, kept in audit_anchors (append-only, the application's role
// cannot change it) and published to Kafka. A row stores only the heads that differ from the
// anchor before it of the same scope (its base; a full set every FULL_ANCHOR_EVERY anchors), so
// the table grows with what changed, not with every stream at every anchor; the full set is
// rebuilt from the chain, and the digest over it checks the rows it came from too. A stream whose event at the anchored version no
// longer has the anchored hash was rewritten (even with a recomputed chain), one with fewer events
// was truncated, one without events was deleted. With RODS_AUDIT_HMAC_KEY the digest is an
// HMAC-SHA256, so whoever can write the table but lacks the key cannot forge an anchor.
import { createHash, createHmac, timingSafeEqual } from 'node:crypto';
import pg from 'pg';
import { canonicalEventJson, chainHash, GENESIS_HASH } from './canonical.js';
// For its side effect: bigint columns (positions, versions) parse as numbers.
import '../db.js';
import { lockForTransaction } from '../locks.js';

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

  // A break at the stream's last stored event.
  const brokenAtLast = (s: NonNullable<typeof cur>, detail: string): AuditBroken =>
    broken(s.streamId, s.version, s.eventId, s.position, 'head-mismatch', detail);

  const finish = (s: NonNullable<typeof cur>): AuditBroken | null => {
    streams++;
    const head = heads.get(s.streamId);
    if (!head) return brokenAtLast(s, 'the stream has events but no row in streams');
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
      return brokenAtLast(
        s,
        `streams records version ${head.version} but events go up to version ${s.version}`,
      );
    }
    if (!head.last_hash.equals(s.hash)) {
      return brokenAtLast(s, 'the head hash in streams differs from the hash of the last event');
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

export type AnchorAlgorithm = 'sha256' | 'hmac-sha256';

/** One stream's head in an anchor: id, version and the hash of the event at that version (hex). */
export type AnchorHead = [streamId: string, version: number, hash: string];

export interface Anchor {
  anchorId: number;
  /** The store anchored (rods_settings 'audit.store_id'). */
  storeId: string;
  anchoredAt: string;
  globalPosition: number;
  /** null: every stream; else only those whose id starts with this. */
  streamPrefix: string | null;
  streamCount: number;
  algorithm: AnchorAlgorithm;
  /** Hex. */
  digest: string;
}

const DIGEST_DOMAIN = 'rods-audit-anchor/v1\n';

/** The digest of an anchor: SHA-256, or HMAC-SHA256 with `key`, over its canonical text. */
export function anchorDigest(
  a: { storeId: string; globalPosition: number; streamPrefix: string | null; heads: AnchorHead[] },
  key?: string,
): { algorithm: AnchorAlgorithm; digest: Buffer } {
  const h = key ? createHmac('sha256', key) : createHash('sha256');
  h.update(DIGEST_DOMAIN);
  h.update(`${JSON.stringify([a.storeId, a.globalPosition, a.streamPrefix])}\n`);
  for (const head of a.heads) h.update(`${JSON.stringify(head)}\n`);
  return { algorithm: key ? 'hmac-sha256' : 'sha256', digest: h.digest() };
}

/** The id of this store, made by the migration that added anchors. */
export async function auditStoreId(db: pg.Pool | pg.ClientBase): Promise<string> {
  const { rows } = await db.query<{ id: string }>(
    `select value #>> '{}' as id from rods_settings where key = 'audit.store_id'`,
  );
  if (!rows[0]) throw new Error("rods_settings has no 'audit.store_id' (run `rods migrate`)");
  return rows[0].id;
}

/** The key from RODS_AUDIT_HMAC_KEY, or undefined. */
export function auditKey(env: NodeJS.ProcessEnv = process.env): string | undefined {
  return env.RODS_AUDIT_HMAC_KEY || undefined;
}

interface AnchorRow {
  anchor_id: number;
  base_anchor_id: number | null;
  store_id: string;
  anchored_at: Date;
  global_position: number;
  stream_prefix: string | null;
  stream_count: number;
  algorithm: AnchorAlgorithm;
  digest: Buffer;
  heads: AnchorHead[];
}

const ANCHOR_COLUMNS =
  'anchor_id, base_anchor_id, store_id, anchored_at, global_position, stream_prefix, stream_count, algorithm, digest';

/** Every this many anchors of a scope, one stores the full set of heads (the others, changes). */
export const FULL_ANCHOR_EVERY = 1000;

/** Stream ids in the order the anchor query sorts them (collate "C": bytes of UTF-8). */
const byStreamId = (a: AnchorHead, b: AnchorHead) => Buffer.compare(Buffer.from(a[0]), Buffer.from(b[0]));

/**
 * The full set of heads of an anchor, rebuilt from its chain: the latest full row, then each
 * row's changes in order. Also the chain's length (rows after the full one).
 */
async function anchoredHeads(
  db: pg.Pool | pg.ClientBase,
  anchorId: number,
): Promise<{ heads: AnchorHead[]; depth: number }> {
  const { rows } = await db.query<{ anchor_id: number; base_anchor_id: number | null; heads: AnchorHead[] }>(
    `with recursive chain as (
       select anchor_id, base_anchor_id, 0 as n from audit_anchors where anchor_id = $1
       union all
       select a.anchor_id, a.base_anchor_id, c.n + 1 from audit_anchors a join chain c on a.anchor_id = c.base_anchor_id
        where c.n < $2
     )
     select a.anchor_id, a.base_anchor_id, a.heads from chain c join audit_anchors a using (anchor_id)
      order by c.n desc`,
    [anchorId, FULL_ANCHOR_EVERY + 1],
  );
  if (rows.length === 0 || rows[0]!.base_anchor_id !== null)
    throw new Error(`anchor ${anchorId}: its chain does not reach a full set of heads`);
  const heads = new Map<string, AnchorHead>();
  for (const r of rows) for (const h of r.heads) heads.set(h[0], h);
  return { heads: [...heads.values()].sort(byStreamId), depth: rows.length - 1 };
}

function anchorOf(r: Omit<AnchorRow, 'heads' | 'base_anchor_id'>): Anchor {
  return {
    anchorId: r.anchor_id,
    storeId: r.store_id,
    anchoredAt: r.anchored_at.toISOString(),
    globalPosition: r.global_position,
    streamPrefix: r.stream_prefix,
    streamCount: r.stream_count,
    algorithm: r.algorithm,
    digest: r.digest.toString('hex'),
  };
}

export interface RecordAnchorOptions {
  /** Only the streams whose id starts with this. */
  streamPrefix?: string;
  /** HMAC key; default RODS_AUDIT_HMAC_KEY. */
  key?: string;
  /** Record nothing when the store has not moved since the latest anchor of the same scope. */
  onlyIfChanged?: boolean;
}

/**
 * Records an anchor of the current heads (one consistent snapshot). Returns it, with `recorded`
 * false when onlyIfChanged found nothing new (the latest anchor is returned then).
 */
export async function recordAnchor(
  pool: pg.Pool,
  opts: RecordAnchorOptions = {},
): Promise<Anchor & { recorded: boolean }> {
  const key = opts.key ?? auditKey();
  const prefix = opts.streamPrefix ?? null;
  const c = await pool.connect();
  try {
    await c.query('begin isolation level repeatable read');
    // One anchor at a time: the onlyIfChanged comparison sees the previous one.
    await lockForTransaction(c, 'rods-audit-anchor');
    const pos = await c.query<{ p: number }>(
      `select coalesce(max(position), 0)::bigint as p from events ${prefix === null ? '' : 'where starts_with(stream_id, $1)'}`,
      prefix === null ? [] : [prefix],
    );
    const globalPosition = pos.rows[0]!.p;
    const { rows } = await c.query<{ stream_id: string; version: number; hash: Buffer }>(
      `select s.stream_id, s.version, coalesce(e.hash, s.last_hash) as hash
         from streams s
         left join events e on e.stream_id = s.stream_id and e.stream_version = s.version
        where s.version > 0 ${prefix === null ? '' : 'and starts_with(s.stream_id, $1)'}
        order by s.stream_id collate "C"`,
      prefix === null ? [] : [prefix],
    );
    const heads: AnchorHead[] = rows.map((r) => [r.stream_id, r.version, r.hash.toString('hex')]);
    const storeId = await auditStoreId(c);
    const { algorithm, digest } = anchorDigest({ storeId, globalPosition, streamPrefix: prefix, heads }, key);
    if (opts.onlyIfChanged) {
      const last = await c.query<Omit<AnchorRow, 'heads'>>(
        `select ${ANCHOR_COLUMNS} from audit_anchors where stream_prefix is not distinct from $1
          order by anchor_id desc limit 1`,
        [prefix],
      );
      const l = last.rows[0];
      if (
        l &&
        l.global_position === globalPosition &&
        l.stream_count === heads.length &&
        l.algorithm === algorithm
      ) {
        await c.query('commit');
        return { ...anchorOf(l), recorded: false };
      }
    }
    // The changes since the previous anchor of the scope, or the full set (the first, every
    // FULL_ANCHOR_EVERY, or when a stream anchored before is gone: a change set cannot say so).
    const prev = await c.query<{ anchor_id: number }>(
      `select anchor_id from audit_anchors where stream_prefix is not distinct from $1 order by anchor_id desc limit 1`,
      [prefix],
    );
    let base: number | null = null;
    let stored = heads;
    const before = prev.rows[0]
      ? await anchoredHeads(c, prev.rows[0].anchor_id).catch(() => undefined)
      : undefined;
    if (before && before.depth + 1 < FULL_ANCHOR_EVERY) {
      const now = new Map(heads.map((h) => [h[0], h]));
      if (before.heads.every((h) => now.has(h[0]))) {
        const was = new Map(before.heads.map((h) => [h[0], h]));
        base = prev.rows[0]!.anchor_id;
        stored = heads.filter((h) => {
          const w = was.get(h[0]);
          return !w || w[1] !== h[1] || w[2] !== h[2];
        });
      }
    }
    const ins = await c.query<Omit<AnchorRow, 'heads'>>(
      `insert into audit_anchors (store_id, global_position, stream_prefix, stream_count, algorithm, digest, heads, base_anchor_id)
       values ($1, $2, $3, $4, $5, $6, $7, $8) returning ${ANCHOR_COLUMNS}`,
      [storeId, globalPosition, prefix, heads.length, algorithm, digest, JSON.stringify(stored), base],
    );
    await c.query('commit');
    return { ...anchorOf(ins.rows[0]!), recorded: true };
  } catch (e) {
    await c.query('rollback').catch(() => {});
    throw e;
  } finally {
    c.release();
  }
}

export type AnchorStreamProblem = 'rewritten' | 'truncated' | 'deleted';

export interface AnchorStreamFinding {
  streamId: string;
  problem: AnchorStreamProblem;
  anchoredVersion: number;
  anchoredHash: string;
  /** The stream's last version now (null: no events). */
  foundVersion: number | null;
  /** The stored hash at the anchored version now (null: no such event). */
  foundHash: string | null;
  detail: string;
}

/** The anchor itself does not hold: its digest, key or published copy disagrees. */
export type AnchorProblem = 'forged' | 'unkeyed' | 'digest-mismatch' | 'not-published' | 'missing';

export interface AnchorCheck {
  ok: boolean;
  anchor: Anchor | null;
  /** Set when the anchor cannot be trusted; stream findings are then not conclusive. */
  anchorProblem?: AnchorProblem;
  anchorDetail?: string;
  /** Anchored streams checked. */
  streams: number;
  findings: AnchorStreamFinding[];
}

export interface VerifyAnchorOptions {
  /** This anchor; default the latest whose scope covers streamPrefix. */
  anchorId?: number;
  /** Only the anchored streams whose id starts with this. */
  streamPrefix?: string;
  /** Only this anchored stream. */
  streamId?: string;
  /** HMAC key; default RODS_AUDIT_HMAC_KEY. With a key, an unkeyed or mis-keyed anchor is forged. */
  key?: string;
  /** The digest (hex) the anchor must have, e.g. from its Kafka copy. */
  expectedDigest?: string;
  /** Streams per query; default 2000. */
  pageSize?: number;
}

/** The id of the latest anchor covering `streamPrefix` (every stream when undefined), if any. */
export async function latestAnchorId(
  db: pg.Pool | pg.ClientBase,
  streamPrefix?: string,
): Promise<number | undefined> {
  const { rows } = await db.query<{ id: number }>(
    `select anchor_id as id from audit_anchors
      where stream_prefix is null ${streamPrefix === undefined ? '' : 'or starts_with($1, stream_prefix)'}
      order by anchor_id desc limit 1`,
    streamPrefix === undefined ? [] : [streamPrefix],
  );
  return rows[0]?.id;
}

/** Checks the store against an anchor: names every anchored stream rewritten, truncated or deleted. */
export async function verifyAnchor(pool: pg.Pool, opts: VerifyAnchorOptions = {}): Promise<AnchorCheck> {
  const key = opts.key ?? auditKey();
  const id = opts.anchorId ?? (await latestAnchorId(pool, opts.streamPrefix));
  if (id === undefined) {
    return {
      ok: false,
      anchor: null,
      anchorProblem: 'missing',
      anchorDetail: 'no anchor recorded yet (`rods audit anchor`)',
      streams: 0,
      findings: [],
    };
  }
  const { rows } = await pool.query<Omit<AnchorRow, 'heads'>>(
    `select ${ANCHOR_COLUMNS} from audit_anchors where anchor_id = $1`,
    [id],
  );
  const found = rows[0];
  if (!found) {
    return {
      ok: false,
      anchor: null,
      anchorProblem: 'missing',
      anchorDetail: `anchor ${id} is not in audit_anchors`,
      streams: 0,
      findings: [],
    };
  }
  const anchor = anchorOf(found);
  let full: AnchorHead[] = [];
  try {
    full = (await anchoredHeads(pool, id)).heads;
  } catch (e) {
    return {
      ok: false,
      anchor,
      anchorProblem: 'digest-mismatch',
      anchorDetail: (e as Error).message,
      streams: 0,
      findings: [],
    };
  }
  const row: AnchorRow = { ...found, heads: full };
  const out: AnchorCheck = { ok: true, anchor, streams: 0, findings: [] };
  const fail = (p: AnchorProblem, detail: string) => {
    out.ok = false;
    out.anchorProblem ??= p;
    out.anchorDetail ??= detail;
  };
  const recomputed = anchorDigest(
    {
      storeId: row.store_id,
      globalPosition: row.global_position,
      streamPrefix: row.stream_prefix,
      heads: row.heads,
    },
    row.algorithm === 'hmac-sha256' ? key : undefined,
  );
  if (key && row.algorithm !== 'hmac-sha256') {
    fail('forged', `anchor ${id} is not keyed (${row.algorithm}) while RODS_AUDIT_HMAC_KEY is set`);
  } else if (row.algorithm === 'hmac-sha256' && !key) {
    // Without the key only the recorded heads can be checked, not the MAC.
  } else if (!timingSafeEqual(recomputed.digest, row.digest)) {
    fail(
      row.algorithm === 'hmac-sha256' ? 'forged' : 'digest-mismatch',
      row.algorithm === 'hmac-sha256'
        ? `anchor ${id}: the MAC does not verify with RODS_AUDIT_HMAC_KEY`
        : `anchor ${id}: its digest does not match its recorded heads`,
    );
  }
  if (opts.expectedDigest !== undefined && opts.expectedDigest !== anchor.digest) {
    fail(
      'forged',
      `anchor ${id}: digest ${anchor.digest} differs from the published copy ${opts.expectedDigest}`,
    );
  }
  const heads = row.heads.filter(
    (h) =>
      (opts.streamPrefix === undefined || h[0].startsWith(opts.streamPrefix)) &&
      (opts.streamId === undefined || h[0] === opts.streamId),
  );
  const pageSize = opts.pageSize ?? 2000;
  for (let i = 0; i < heads.length; i += pageSize) {
    const page = heads.slice(i, i + pageSize);
    const found = await pool.query<{ stream_id: string; hash: Buffer | null; last: number | null }>(
      `select h.stream_id, e.hash,
              (select max(x.stream_version) from events x where x.stream_id = h.stream_id) as last
         from unnest($1::text[], $2::bigint[]) as h(stream_id, version)
         left join events e on e.stream_id = h.stream_id and e.stream_version = h.version`,
      [page.map((h) => h[0]), page.map((h) => h[1])],
    );
    const byId = new Map(found.rows.map((r) => [r.stream_id, r]));
    for (const [streamId, version, hash] of page) {
      out.streams++;
      const f = byId.get(streamId);
      const last = f?.last ?? null;
      const now = f?.hash ? f.hash.toString('hex') : null;
      const finding = (problem: AnchorStreamProblem, detail: string) => {
        out.ok = false;
        out.findings.push({
          streamId,
          problem,
          anchoredVersion: version,
          anchoredHash: hash,
          foundVersion: last,
          foundHash: now,
          detail,
        });
      };
      if (last === null) finding('deleted', `anchored at version ${version}, the stream has no events`);
      else if (last < version)
        finding('truncated', `anchored at version ${version}, the stream ends at version ${last}`);
      else if (now !== hash)
        finding('rewritten', `the event at version ${version} hashes to ${now}, anchored ${hash}`);
    }
  }
  return out;
}

/**
 * Writes a row to the store's settings, reads it back and deletes it (`rods doctor`'s proof that
 * the app role can write): whether the row came back.
 */
export async function settingsRoundTrip(db: pg.Pool, key: string, value: unknown): Promise<boolean> {
  await db.query('insert into rods_settings (key, value) values ($1, $2)', [key, JSON.stringify(value)]);
  const r = await db.query('select value from rods_settings where key = $1', [key]);
  await db.query('delete from rods_settings where key = $1', [key]);
  return r.rowCount === 1;
}
