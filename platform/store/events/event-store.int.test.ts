import { randomUUID } from 'node:crypto';
import { afterAll, describe, expect, inject, it } from 'vitest';
import {
  eventually,
  FINGERPRINT,
  newEvent,
  readEverything,
  uniqueStream,
} from '../../../test/support/store/events.js';
import { createPool, inTransaction } from '../db.js';
import { verifyChains } from './audit.js';
import { canonicalEventJson, chainHash, GENESIS_HASH } from './canonical.js';
import {
  append,
  ConcurrencyError,
  cursorAt,
  cursorOf,
  headCursor,
  IdempotencyConflictError,
  InvalidEventError,
  type NewEvent,
  type RecordedEvent,
  readAll,
  readLog,
  readStream,
  START,
  StreamOrderError,
  streamVersion,
  subscribeAll,
} from './event-store.js';

const pool = createPool({ application: 'rods-test-event-store', max: 8 });
afterAll(() => pool.end());

const mine = (events: RecordedEvent[], ...streams: string[]) =>
  events.filter((e) => streams.includes(e.streamId));

describe('append', () => {
  it('appends a batch with versions 1..n, ascending positions and the hash chain', async () => {
    const s = uniqueStream('es-append');
    const batch = [newEvent('A', { i: 1 }), newEvent('B', { i: 2 }), newEvent('C', { i: 3 })];
    const r = await append(pool, s, 'no-stream', batch);
    expect(r.appended).toBe(true);
    expect(r.nextExpectedVersion).toBe(3);
    expect(r.positions).toHaveLength(3);
    expect([...r.positions].sort((a, b) => a - b)).toEqual(r.positions);

    const more = await append(pool, s, 3, [newEvent('D', { i: 4 })]);
    expect(more.nextExpectedVersion).toBe(4);
    expect(more.positions[0]).toBeGreaterThan(r.positions[2]!);

    const events = await readStream(pool, s);
    expect(events.map((e) => [e.version, e.type, e.payload])).toEqual([
      [1, 'A', { i: 1 }],
      [2, 'B', { i: 2 }],
      [3, 'C', { i: 3 }],
      [4, 'D', { i: 4 }],
    ]);
    expect(events.map((e) => e.position)).toEqual([...r.positions, ...more.positions]);
    expect(events[0]!.eventId).toBe(batch[0]!.eventId);
    expect(events[0]!.recordedAt).toBeInstanceOf(Date);
    const times = await pool.query<{ recorded_at: Date }>(
      'select recorded_at from events where stream_id = $1 order by stream_version',
      [s],
    );
    expect(events.map((e) => e.recordedAt)).toEqual(times.rows.map((r) => r.recorded_at));
    expect(await streamVersion(pool, s)).toBe(4);
    expect((await readStream(pool, s, { fromVersion: 3 })).map((e) => e.version)).toEqual([3, 4]);

    const { rows } = await pool.query<{ prev_hash: Buffer; hash: Buffer }>(
      'select prev_hash, hash from events where stream_id = $1 order by stream_version',
      [s],
    );
    expect(rows[0]!.prev_hash).toEqual(GENESIS_HASH);
    for (let i = 1; i < rows.length; i++) expect(rows[i]!.prev_hash).toEqual(rows[i - 1]!.hash);
    const head = await pool.query<{ last_hash: Buffer }>(
      'select last_hash from streams where stream_id = $1',
      [s],
    );
    expect(head.rows[0]!.last_hash).toEqual(rows[3]!.hash);
  });

  it('refuses a stale expected version with a ConcurrencyError naming stream, expected and actual', async () => {
    const s = uniqueStream('es-conc');
    await append(pool, s, 'no-stream', [newEvent('A', {}), newEvent('A', {})]);
    const err = await append(pool, s, 1, [newEvent('B', {})]).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ConcurrencyError);
    expect(err).toMatchObject({ streamId: s, expected: 1, actual: 2 });
    expect((err as Error).message).toContain(s);
    await expect(append(pool, s, 'no-stream', [newEvent('B', {})])).rejects.toMatchObject({
      name: 'ConcurrencyError',
      expected: 'no-stream',
      actual: 2,
    });
    const missing = uniqueStream('es-conc-missing');
    await expect(append(pool, missing, 5, [newEvent('B', {})])).rejects.toMatchObject({
      streamId: missing,
      expected: 5,
      actual: 0,
    });
    expect(await streamVersion(pool, missing)).toBe(0);
    expect((await append(pool, s, 'any', [newEvent('C', {})])).nextExpectedVersion).toBe(3);
    expect(
      (await append(pool, uniqueStream('es-conc-zero'), 0, [newEvent('C', {})])).nextExpectedVersion,
    ).toBe(1);
    expect(await streamVersion(pool, s)).toBe(3);
  });

  it('serialises concurrent appends to one stream into a gap-free version sequence', async () => {
    const s = uniqueStream('es-race');
    const start = await headCursor(pool);
    const results = await Promise.all(
      Array.from({ length: 8 }, (_, i) =>
        append(pool, s, 'any', [newEvent('R', { i }), newEvent('R', { i })]),
      ),
    );
    expect(results.map((r) => r.nextExpectedVersion).sort((a, b) => a - b)).toEqual([
      2, 4, 6, 8, 10, 12, 14, 16,
    ]);
    const events = await readStream(pool, s);
    expect(events.map((e) => e.version)).toEqual(Array.from({ length: 16 }, (_, i) => i + 1));
    // The log readers deliver the stream in version order too.
    const logged = await eventually(
      async () => mine(await readEverything(pool, start), s),
      (r) => r.length === 16,
    );
    expect(logged.map((e) => e.version)).toEqual(events.map((e) => e.version));
    // Only one appender of "no-stream" wins.
    const t = uniqueStream('es-race-new');
    const outcomes = await Promise.allSettled(
      Array.from({ length: 5 }, () => append(pool, t, 'no-stream', [newEvent('N', {})])),
    );
    expect(outcomes.filter((o) => o.status === 'fulfilled')).toHaveLength(1);
    for (const o of outcomes) if (o.status === 'rejected') expect(o.reason).toBeInstanceOf(ConcurrencyError);
  });

  it('treats a re-append of stored event ids as a no-op that reports the stored positions', async () => {
    const s = uniqueStream('es-idem');
    const batch = [newEvent('A', { n: 1 }), newEvent('B', { n: 2 })];
    const first = await append(pool, s, 'no-stream', batch);
    // A retry with the expected version of the first attempt: no error, nothing bumped.
    const again = await append(pool, s, 'no-stream', batch);
    expect(again).toEqual({ positions: first.positions, nextExpectedVersion: 2, appended: false });
    // Upper-case ids are the same ids.
    const upper = batch.map((e) => ({ ...e, eventId: e.eventId.toUpperCase() }));
    expect((await append(pool, s, 'any', upper)).positions).toEqual(first.positions);
    expect(await streamVersion(pool, s)).toBe(2);
    expect((await readStream(pool, s)).length).toBe(2);
  });

  it('refuses batches that mix stored and new ids, or reuse an id of another stream, writing nothing', async () => {
    const s = uniqueStream('es-mixed');
    const a = newEvent('A', {});
    await append(pool, s, 'no-stream', [a]);
    const fresh = newEvent('B', {});
    const mixed = await append(pool, s, 1, [a, fresh]).catch((e: unknown) => e);
    expect(mixed).toBeInstanceOf(IdempotencyConflictError);
    expect((mixed as IdempotencyConflictError).eventIds).toEqual([a.eventId]);
    const other = uniqueStream('es-mixed-other');
    const foreign = await append(pool, other, 'any', [a]).catch((e: unknown) => e);
    expect(foreign).toBeInstanceOf(IdempotencyConflictError);
    expect((foreign as Error).message).toContain(s);
    const retyped = await append(pool, s, 'any', [{ ...a, type: 'Other' } as unknown as NewEvent]).catch(
      (e: unknown) => e,
    );
    expect(retyped).toBeInstanceOf(IdempotencyConflictError);
    expect(await streamVersion(pool, s)).toBe(1);
    expect(await readStream(pool, other)).toEqual([]);
    const { rows } = await pool.query('select 1 from events where event_id = $1', [fresh.eventId]);
    expect(rows).toHaveLength(0);
  });

  it('validates events before touching the database', async () => {
    const s = uniqueStream('es-invalid');
    const cases: Array<[string, Parameters<typeof append>[3]]> = [
      ['not a UUID', [{ ...newEvent('A', {}), eventId: 'nope' }]],
      ['16 hex digits', [{ ...newEvent('A', {}), fingerprint: 'xyz' }]],
      ['finite', [newEvent('A', { reward: Number.NaN })]],
      ['U+0000', [newEvent('A', { text: 'a\u0000' })]],
      [
        'twice',
        (() => {
          const e = newEvent('A', {});
          return [e, e];
        })(),
      ],
      ['type', [newEvent('', {})]],
    ];
    for (const [msg, events] of cases) {
      await expect(append(pool, s, 'any', events), msg).rejects.toThrow(InvalidEventError);
      await expect(append(pool, s, 'any', events), msg).rejects.toThrow(msg);
    }
    expect(await streamVersion(pool, s)).toBe(0);
  });

  it('runs inside the caller transaction: rolled back with it, and a refusal leaves it usable', async () => {
    const s = uniqueStream('es-tx');
    const c = await pool.connect();
    try {
      await c.query('begin');
      await append(c, s, 'no-stream', [newEvent('A', {})]);
      await c.query('rollback');
      expect(await streamVersion(pool, s)).toBe(0);

      await c.query('begin');
      const r = await append(c, s, 'no-stream', [newEvent('A', {})]);
      await expect(append(c, s, 7, [newEvent('B', {})])).rejects.toBeInstanceOf(ConcurrencyError);
      // The transaction is still usable after the refusal, and commits the first append.
      await append(c, s, r.nextExpectedVersion, [newEvent('C', {})]);
      expect(await streamVersion(pool, s)).toBe(0);
      await c.query('commit');
      expect((await readStream(pool, s)).map((e) => e.type)).toEqual(['A', 'C']);
    } finally {
      c.release();
    }
  });

  it('hashes canonical bytes that a row read back from jsonb reproduces', async () => {
    const s = uniqueStream('es-canon');
    const payload = {
      zeta: 1,
      alpha: [0.1 + 0.2, 1e21, 1.5e-7, 5e-324, 1.7976931348623157e308, -0, 2 ** 53 + 2, -12.5, 0],
      unicode: 'φ = 4·m·(1−m) 😀 "quoted" \\ \n\t\u0001 \u2028',
      nested: { b: { y: true, x: null }, a: [] },
      '10': 'integer-like key',
      é: 'accented key',
      long: 'x'.repeat(3000),
    };
    const metadata = { producer: 'test', correlationId: randomUUID(), causationId: randomUUID() };
    const e = newEvent('Canon', payload, metadata);
    await append(pool, s, 'no-stream', [e]);
    const [row] = await readStream(pool, s);
    expect(row!.payload).toEqual({ ...payload, alpha: payload.alpha.map((x) => (Object.is(x, -0) ? 0 : x)) });
    const stored = await pool.query<{ hash: Buffer }>('select hash from events where stream_id = $1', [s]);
    const fields = {
      streamId: row!.streamId,
      version: row!.version,
      eventId: row!.eventId,
      type: row!.type,
      fingerprint: row!.fingerprint,
      payload: row!.payload,
      metadata: row!.metadata,
    };
    expect(chainHash(GENESIS_HASH, canonicalEventJson(fields))).toEqual(stored.rows[0]!.hash);
    expect(row!.fingerprint).toBe(FINGERPRINT);

    // Scalar payloads, JSON null included, are stored as jsonb scalars (not SQL NULL).
    const scalars = [null, 'text', 0, false];
    await append(
      pool,
      s,
      1,
      scalars.map((p) => newEvent('Scalar', p)),
    );
    expect((await readStream(pool, s, { fromVersion: 2 })).map((e) => e.payload)).toEqual(scalars);
    expect(await verifyChains(pool, { streamId: s })).toEqual({ ok: true, events: 5, streams: 1 });
  });

  it('is append-only unless the session sets rods.allow_event_mutation', async () => {
    // The trigger guards the tables' owner against mistakes (the application's role has no
    // UPDATE or DELETE on events at all: platform/store/audit.int.test.ts).
    const { ownerDatabaseUrl, databaseUrl } = inject('endpoints');
    const owner = createPool({ connectionString: ownerDatabaseUrl ?? databaseUrl, max: 2 });
    try {
      const s = uniqueStream('es-immutable');
      await append(pool, s, 'no-stream', [newEvent('A', { v: 1 })]);
      await expect(
        owner.query(`update events set payload = '{"v":2}' where stream_id = $1`, [s]),
      ).rejects.toThrow(/append-only/);
      await expect(owner.query('delete from events where stream_id = $1', [s])).rejects.toThrow(
        /append-only/,
      );
      // The documented bypass (maintenance, tamper tests): SET LOCAL inside a transaction.
      await inTransaction(owner, async (c) => {
        await c.query(`set local rods.allow_event_mutation = 'on'`);
        await c.query(`update events set payload = '{"v":2}' where stream_id = $1`, [s]);
      });
      expect((await readStream(pool, s))[0]!.payload).toEqual({ v: 2 });
      await expect(
        owner.query(`update events set payload = '{"v":3}' where stream_id = $1`, [s]),
      ).rejects.toThrow(/append-only/);
      // Remove the tampered stream so that a global `rods audit verify` stays clean.
      await inTransaction(owner, async (c) => {
        await c.query(`set local rods.allow_event_mutation = 'on'`);
        await c.query('delete from events where stream_id = $1', [s]);
        await c.query('delete from streams where stream_id = $1', [s]);
      });
      expect(await readStream(pool, s)).toEqual([]);
    } finally {
      await owner.end();
    }
  });
});

describe('reading the log', () => {
  it('does not pass an event whose transaction is still open, then returns both in position order', async () => {
    const start = await headCursor(pool);
    const slow = uniqueStream('es-read-slow');
    const fast = uniqueStream('es-read-fast');
    const c = await pool.connect();
    try {
      await c.query('begin');
      const held = await append(c, slow, 'no-stream', [newEvent('Slow', {})]);
      const done = await append(pool, fast, 'no-stream', [newEvent('Fast', {})]);
      expect(done.positions[0]).toBeGreaterThan(held.positions[0]!);

      // The committed later event is in the table, but the reader must not hand it out yet.
      const visible = await pool.query('select 1 from events where position = $1', [done.positions[0]]);
      expect(visible.rows).toHaveLength(1);
      expect(mine(await readEverything(pool, start), slow, fast)).toEqual([]);
      expect(mine(await readAll(pool, { after: start, limit: 100_000 }), slow, fast)).toEqual([]);

      await c.query('commit');
    } finally {
      c.release();
    }
    const both = await eventually(
      async () => mine(await readEverything(pool, start), slow, fast),
      (r) => r.length === 2,
    );
    expect(both.map((e) => e.streamId)).toEqual([slow, fast]);
    expect(both[0]!.position).toBeLessThan(both[1]!.position);
  });

  it('never skips an event whose position is lower than one already read', async () => {
    // Transaction B takes its id first, A appends (lower position) and stays open, B appends
    // (higher position) and commits. A position-only reader would hand out B, move past A's
    // position and never return A.
    const sa = uniqueStream('es-skip-a');
    const sb = uniqueStream('es-skip-b');
    const start = await headCursor(pool);
    const a = await pool.connect();
    const b = await pool.connect();
    let afterB: RecordedEvent | undefined;
    try {
      await b.query('begin');
      await b.query('select pg_current_xact_id()');
      await a.query('begin');
      const pa = (await append(a, sa, 'no-stream', [newEvent('A', {})])).positions[0]!;
      const pb = (await append(b, sb, 'no-stream', [newEvent('B', {})])).positions[0]!;
      expect(pb).toBeGreaterThan(pa);
      await b.query('commit');
      const seen = await eventually(
        async () => mine(await readEverything(pool, start), sa, sb),
        (r) => r.length > 0,
      );
      expect(seen.map((e) => e.streamId)).toEqual([sb]);
      afterB = seen[0];
      await a.query('commit');
    } finally {
      a.release();
      b.release();
    }
    const rest = await eventually(
      async () => mine(await readEverything(pool, cursorOf(afterB!)), sa, sb),
      (r) => r.length > 0,
    );
    expect(rest.map((e) => e.streamId)).toEqual([sa]);
    // A bare position resolves to the same cursor.
    expect(await cursorAt(pool, afterB!.position)).toEqual(cursorOf(afterB!));
  });

  it('keeps per-stream order by refusing an append from an older transaction (StreamOrderError)', async () => {
    const s = uniqueStream('es-order');
    const old = await pool.connect();
    try {
      await old.query('begin');
      await old.query('select pg_current_xact_id()');
      await append(pool, s, 'no-stream', [newEvent('First', {})]);
      const err = await append(old, s, 'any', [newEvent('Second', {})]).catch((e: unknown) => e);
      expect(err).toBeInstanceOf(StreamOrderError);
      expect(err).toBeInstanceOf(ConcurrencyError);
      await old.query('rollback');
    } finally {
      old.release();
    }
    // The retry in a new transaction goes through.
    expect((await append(pool, s, 'any', [newEvent('Second', {})])).nextExpectedVersion).toBe(2);
  });

  it('subscribeAll follows the log and stops on abort', async () => {
    const s = uniqueStream('es-sub');
    const start = await headCursor(pool);
    const ctl = new AbortController();
    const got: RecordedEvent[] = [];
    const consumer = (async () => {
      for await (const e of subscribeAll(pool, {
        after: start,
        batchSize: 2,
        pollMs: 20,
        signal: ctl.signal,
      })) {
        if (e.streamId === s) got.push(e);
        if (got.length === 5) ctl.abort();
      }
    })();
    let v = 0;
    for (let i = 0; i < 5; i++) v = (await append(pool, s, v, [newEvent('S', { i })])).nextExpectedVersion;
    await consumer;
    expect(got.map((e) => (e.payload as { i: number }).i)).toEqual([0, 1, 2, 3, 4]);
    expect(got.map((e) => e.version)).toEqual([1, 2, 3, 4, 5]);
  });
});

describe('the bulk reader (readLog)', () => {
  const flat = async (pages: AsyncIterable<RecordedEvent[]>, sizes?: number[]) => {
    const out: RecordedEvent[] = [];
    for await (const p of pages) {
      sizes?.push(p.length);
      out.push(...p);
    }
    return out;
  };

  it('returns what readPage returns, field by field and in the same order, across transactions and pages', async () => {
    const start = await headCursor(pool);
    const s1 = uniqueStream('es-log-1');
    const s2 = uniqueStream('es-log-2');
    // One transaction over two streams, then concurrent transactions of their own.
    await inTransaction(pool, async (c) => {
      await append(c, s1, 'no-stream', [
        newEvent('A', { n: 1, text: 'é \\ "q"\t\n', nested: { xs: [0.125, -0, 1e-7, null, true] } }),
        newEvent('B', {}, { correlationId: 'c-1', producer: 'p' }),
      ]);
      await append(c, s2, 'no-stream', [newEvent('C', [1, 2, 3])]);
    });
    await Promise.all(
      Array.from({ length: 6 }, (_, i) =>
        append(pool, `${s1}/x${i}`, 'no-stream', [
          newEvent('X', { i }),
          newEvent('Y', { i, s: 'y'.repeat(i * 1000) }),
        ]),
      ),
    );
    const isMine = (e: RecordedEvent) => e.streamId.startsWith(s1) || e.streamId === s2;
    const sizes: number[] = [];
    const bulk = await eventually(
      async () => {
        sizes.length = 0;
        return flat(readLog(pool, { after: start, pageSize: 3 }), sizes);
      },
      (r) => r.filter(isMine).length === 15,
    );
    expect(bulk.filter(isMine)).toHaveLength(15);
    // Full pages of 3 but the last.
    expect(sizes.slice(0, -1).every((n) => n === 3)).toBe(true);
    expect(sizes.at(-1)).toBeGreaterThan(0);
    // Whatever readLog returned, a later paged read returns first, in the same order: rows
    // committed after the bulk read started sort after everything it returned.
    const paged = await readEverything(pool, start, 4);
    expect(paged.slice(0, bulk.length)).toEqual(bulk);
    expect(bulk.filter((e) => e.streamId === s1).map((e) => e.version)).toEqual([1, 2]);
    expect(bulk.find((e) => e.type === 'B')!.metadata).toEqual({ correlationId: 'c-1', producer: 'p' });
    expect(bulk[0]!.recordedAt).toBeInstanceOf(Date);
    // From a bare position: the events after it.
    const third = bulk.filter(isMine)[2]!;
    const after = await flat(readLog(pool, { after: third.position, pageSize: 1000 }));
    expect(after.slice(0, bulk.length - bulk.indexOf(third) - 1)).toEqual(
      bulk.slice(bulk.indexOf(third) + 1),
    );
  });

  it('does not pass an event whose transaction is still open; a pass from the last cursor returns it', async () => {
    const sa = uniqueStream('es-log-skip-a');
    const sb = uniqueStream('es-log-skip-b');
    const start = await headCursor(pool);
    const a = await pool.connect();
    const b = await pool.connect();
    let afterB: RecordedEvent | undefined;
    try {
      await b.query('begin');
      await b.query('select pg_current_xact_id()');
      await a.query('begin');
      await append(a, sa, 'no-stream', [newEvent('A', {})]);
      await append(b, sb, 'no-stream', [newEvent('B', {})]);
      await b.query('commit');
      const seen = await eventually(
        async () => mine(await flat(readLog(pool, { after: start })), sa, sb),
        (r) => r.length > 0,
      );
      expect(seen.map((e) => e.streamId)).toEqual([sb]);
      afterB = seen[0];
      await a.query('commit');
    } finally {
      a.release();
      b.release();
    }
    const rest = await eventually(
      async () => mine(await flat(readLog(pool, { after: cursorOf(afterB!) })), sa, sb),
      (r) => r.length > 0,
    );
    expect(rest.map((e) => e.streamId)).toEqual([sa]);
  });

  it('reads what was visible when the pass started while appends go on, and the next pass the rest', async () => {
    const s = uniqueStream('es-log-live');
    const start = await headCursor(pool);
    let v = 0;
    for (let i = 0; i < 5; i++)
      v = (
        await append(
          pool,
          s,
          v,
          Array.from({ length: 10 }, (_, k) => newEvent('E', { k })),
        )
      ).nextExpectedVersion;
    // Wait until the first 50 are visible, so the pass below starts with all of them.
    await eventually(
      async () => mine(await readEverything(pool, start), s),
      (r) => r.length === 50,
    );
    const got: RecordedEvent[] = [];
    let appending: Promise<void> | undefined;
    for await (const page of readLog(pool, { after: start, pageSize: 2 })) {
      got.push(...page);
      // The statement is running: commit 50 more, from several connections, before reading on.
      appending ??= (async () => {
        for (let i = 0; i < 5; i++)
          v = (
            await append(
              pool,
              s,
              v,
              Array.from({ length: 10 }, (_, k) => newEvent('F', { k })),
            )
          ).nextExpectedVersion;
      })();
      await appending;
    }
    expect(mine(got, s).map((e) => e.version)).toEqual(Array.from({ length: 50 }, (_, i) => i + 1));
    const last = got.at(-1)!;
    const more = await eventually(
      async () => mine(await flat(readLog(pool, { after: cursorOf(last) })), s),
      (r) => r.length === 50,
    );
    expect(more.map((e) => e.version)).toEqual(Array.from({ length: 50 }, (_, i) => i + 51));
  });

  it('filters by campaign id (quoted), and frees its connection when the loop ends early', async () => {
    const campaign = `es-log-'camp"; select 1; --${randomUUID()}`;
    const s = uniqueStream('es-log-camp');
    const start = await headCursor(pool);
    await append(pool, s, 'no-stream', [
      newEvent('In', { campaignId: campaign, i: 1 }),
      newEvent('Out', { campaignId: `${campaign}x`, i: 2 }),
      newEvent('In', { campaignId: campaign, i: 3 }),
    ]);
    const only = await eventually(
      async () => flat(readLog(pool, { after: start, campaignId: campaign })),
      (r) => r.length === 2,
    );
    expect(only.map((e) => (e.payload as { i: number }).i)).toEqual([1, 3]);

    const one = createPool({ application: 'rods-test-event-store-log', max: 1 });
    try {
      for await (const page of readLog(one, { after: START, pageSize: 1 })) {
        expect(page).toHaveLength(1);
        break;
      }
      // The one connection was closed, not returned mid-COPY: the next query gets a fresh one.
      const r = await one.query<{ n: number }>('select 1 as n');
      expect(r.rows[0]!.n).toBe(1);
    } finally {
      await one.end();
    }
  });
});
