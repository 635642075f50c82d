import { execFile } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { promisify } from 'node:util';
import { afterAll, describe, expect, inject, it } from 'vitest';
import { readPublishedAnchors } from '../../../stages/relay/anchor.js';
import { ROOT } from '../../../test/support/sources.js';
import { newEvent } from '../../../test/support/store/events.js';
import { createPool, inTransaction } from '../db.js';
import { type AnchorCheck, type AuditResult, auditStoreId, verifyChains } from './audit.js';
import { canonicalEventJson, chainHash, GENESIS_HASH } from './canonical.js';
import { append, readStream } from './event-store.js';

// The application's role (DATABASE_URL) and the owner of the tables, the attacker here: only the
// owner can switch the append-only trigger's bypass on (test/global-setup.ts hands its URL).
const endpoints = inject('endpoints');
const pool = createPool({ application: 'rods-test-audit', max: 4 });
const ownerUrl = endpoints.ownerDatabaseUrl ?? endpoints.databaseUrl;
const owner = createPool({ connectionString: ownerUrl, application: 'rods-test-audit-owner', max: 2 });
const prefixes: string[] = [];
afterAll(async () => {
  // Remove this file's streams (tampered ones included) so a global `rods audit verify` stays clean.
  await inTransaction(owner, async (c) => {
    await c.query(`set local rods.allow_event_mutation = 'on'`);
    for (const p of prefixes) {
      await c.query('delete from events where starts_with(stream_id, $1)', [p]);
      await c.query('delete from streams where starts_with(stream_id, $1)', [p]);
    }
  });
  await pool.end();
  await owner.end();
});

/** Two streams (`${prefix}/a`, `${prefix}/b`) of five events each. */
async function twoStreams(): Promise<string> {
  const prefix = `audit-${randomUUID()}`;
  prefixes.push(prefix);
  for (const s of ['a', 'b']) {
    await append(
      pool,
      `${prefix}/${s}`,
      'no-stream',
      Array.from({ length: 5 }, (_, i) =>
        newEvent(`E${i}`, { i, text: `φ ${s}${i}` }, { producer: 'audit-test' }),
      ),
    );
  }
  return prefix;
}

/** Runs SQL as the 'attacker': the tables' owner, who can use the append-only trigger's bypass. */
async function tamper(sql: string, params: unknown[]): Promise<void> {
  await inTransaction(owner, async (c) => {
    await c.query(`set local rods.allow_event_mutation = 'on'`);
    await c.query(sql, params);
  });
}

async function eventAt(streamId: string, version: number) {
  const e = (await readStream(pool, streamId, { fromVersion: version, limit: 1 }))[0];
  if (!e) throw new Error(`no event ${streamId}@${version}`);
  return e;
}

async function cli(args: string[], env: NodeJS.ProcessEnv = {}): Promise<{ code: number; stdout: string }> {
  try {
    const { stdout } = await promisify(execFile)(process.execPath, ['bin/rods.mjs', ...args], {
      cwd: ROOT,
      env: { ...process.env, ...env },
    });
    return { code: 0, stdout };
  } catch (e) {
    const err = e as { code?: number; stdout?: string };
    return { code: err.code ?? -1, stdout: err.stdout ?? '' };
  }
}

describe('verifyChains', () => {
  it('passes clean streams and counts their events, across small pages', async () => {
    const prefix = await twoStreams();
    expect(await verifyChains(pool, { streamPrefix: prefix, pageSize: 3 })).toEqual({
      ok: true,
      events: 10,
      streams: 2,
    });
    expect(await verifyChains(pool, { streamId: `${prefix}/b` })).toEqual({
      ok: true,
      events: 5,
      streams: 1,
    });
    expect(await verifyChains(pool, { streamId: `${prefix}/none` })).toEqual({
      ok: true,
      events: 0,
      streams: 0,
    });
  });

  it('names the stream, version and event id of an event whose payload was edited in SQL', async () => {
    const prefix = await twoStreams();
    const target = await eventAt(`${prefix}/b`, 3);
    await tamper(`update events set payload = jsonb_set(payload, '{i}', '99') where event_id = $1`, [
      target.eventId,
    ]);
    const r = await verifyChains(pool, { streamPrefix: prefix, pageSize: 2 });
    expect(r).toMatchObject({
      ok: false,
      streamId: `${prefix}/b`,
      version: 3,
      eventId: target.eventId,
      position: target.position,
      problem: 'hash-mismatch',
      events: 7,
    });
    // Only the edited stream is broken.
    expect((await verifyChains(pool, { streamId: `${prefix}/a` })).ok).toBe(true);
  });

  it('detects metadata and type edits too', async () => {
    const prefix = await twoStreams();
    const m = await eventAt(`${prefix}/a`, 2);
    await tamper(`update events set metadata = '{"producer":"someone-else"}' where event_id = $1`, [
      m.eventId,
    ]);
    expect(await verifyChains(pool, { streamId: `${prefix}/a` })).toMatchObject({
      ok: false,
      version: 2,
      problem: 'hash-mismatch',
    });
    const t = await eventAt(`${prefix}/b`, 5);
    await tamper('update events set type = $2 where event_id = $1', [t.eventId, 'Forged']);
    expect(await verifyChains(pool, { streamId: `${prefix}/b` })).toMatchObject({
      ok: false,
      version: 5,
      eventId: t.eventId,
      problem: 'hash-mismatch',
    });
  });

  it('catches an edit whose own hash was recomputed at the next link', async () => {
    const prefix = await twoStreams();
    const s = `${prefix}/a`;
    const e = await eventAt(s, 2);
    const forged = { ...(e.payload as object), i: 42 };
    const { rows } = await pool.query<{ prev_hash: Buffer }>(
      'select prev_hash from events where event_id = $1',
      [e.eventId],
    );
    const hash = chainHash(rows[0]!.prev_hash, canonicalEventJson({ ...e, payload: forged }));
    await tamper('update events set payload = $2, hash = $3 where event_id = $1', [
      e.eventId,
      JSON.stringify(forged),
      hash,
    ]);
    const next = await eventAt(s, 3);
    expect(await verifyChains(pool, { streamId: s })).toMatchObject({
      ok: false,
      version: 3,
      eventId: next.eventId,
      problem: 'prev-hash-mismatch',
    });
  });

  it('reports a deleted row as a version gap, or a missing head when it was the last one', async () => {
    const prefix = await twoStreams();
    const mid = await eventAt(`${prefix}/a`, 3);
    const after = await eventAt(`${prefix}/a`, 4);
    await tamper('delete from events where event_id = $1', [mid.eventId]);
    expect(await verifyChains(pool, { streamPrefix: prefix })).toMatchObject({
      ok: false,
      streamId: `${prefix}/a`,
      version: 4,
      eventId: after.eventId,
      problem: 'version-gap',
    });

    const last = await eventAt(`${prefix}/b`, 5);
    await tamper('delete from events where event_id = $1', [last.eventId]);
    expect(await verifyChains(pool, { streamId: `${prefix}/b` })).toMatchObject({
      ok: false,
      streamId: `${prefix}/b`,
      version: 5,
      eventId: null,
      problem: 'missing-head',
      events: 4,
    });

    await tamper('delete from events where stream_id = $1', [`${prefix}/b`]);
    expect(await verifyChains(pool, { streamId: `${prefix}/b` })).toMatchObject({
      ok: false,
      streamId: `${prefix}/b`,
      problem: 'missing-head',
      events: 0,
    });
  });

  it('reports a stream head that disagrees with its last event', async () => {
    const prefix = await twoStreams();
    await pool.query('update streams set last_hash = $2 where stream_id = $1', [
      `${prefix}/a`,
      Buffer.alloc(32, 7),
    ]);
    expect(await verifyChains(pool, { streamId: `${prefix}/a` })).toMatchObject({
      ok: false,
      version: 5,
      problem: 'head-mismatch',
    });
    await owner.query('delete from streams where stream_id = $1', [`${prefix}/b`]);
    expect(await verifyChains(pool, { streamId: `${prefix}/b` })).toMatchObject({
      ok: false,
      problem: 'head-mismatch',
    });
  });
});

describe('rods audit verify', () => {
  it('prints the count and exits 0 when clean, names the broken link and exits 1 when not', async () => {
    const prefix = await twoStreams();
    const clean = await cli(['audit', 'verify', '--no-anchor', '--prefix', prefix]);
    expect(clean).toEqual({ code: 0, stdout: 'ok: 10 events checked in 2 streams\n' });
    expect(await cli(['audit', 'verify', '--no-anchor', '--stream', `${prefix}/a`])).toEqual({
      code: 0,
      stdout: `ok: 5 events checked in stream ${prefix}/a\n`,
    });

    const target = await eventAt(`${prefix}/a`, 4);
    await tamper(`update events set payload = '{}' where event_id = $1`, [target.eventId]);
    const broken = await cli(['audit', 'verify', '--no-anchor', '--stream', `${prefix}/a`]);
    expect(broken.code).toBe(1);
    expect(broken.stdout).toContain(`stream ${prefix}/a version 4 event ${target.eventId}`);
    expect(broken.stdout).toContain('hash-mismatch');

    const json = await cli(['audit', 'verify', '--no-anchor', '--prefix', prefix, '--json']);
    expect(json.code).toBe(1);
    const parsed = JSON.parse(json.stdout) as { ok: boolean; chain: AuditResult };
    expect(parsed.ok).toBe(false);
    expect(parsed.chain).toMatchObject({
      ok: false,
      streamId: `${prefix}/a`,
      version: 4,
      eventId: target.eventId,
    });
  });
});

interface VerifyJson {
  ok: boolean;
  chain: AuditResult;
  anchor: AnchorCheck | null;
}

const NO_KEY = { RODS_AUDIT_HMAC_KEY: '' };

async function anchorCli(prefix: string, env: NodeJS.ProcessEnv = NO_KEY) {
  const r = await cli(['audit', 'anchor', '--prefix', prefix, '--json'], env);
  expect(r.code).toBe(0);
  return JSON.parse(r.stdout) as { anchorId: number; digest: string; algorithm: string; streamCount: number };
}

async function verifyCli(
  prefix: string,
  anchorId: number,
  env: NodeJS.ProcessEnv = NO_KEY,
  more: string[] = [],
) {
  const r = await cli(
    ['audit', 'verify', '--prefix', prefix, '--anchor', String(anchorId), '--json', ...more],
    env,
  );
  return { code: r.code, out: JSON.parse(r.stdout) as VerifyJson };
}

/** The owner rewrites every payload of a stream and recomputes every hash and the head. */
async function rewriteWithChain(streamId: string): Promise<void> {
  const events = await readStream(pool, streamId);
  await inTransaction(owner, async (c) => {
    await c.query(`set local rods.allow_event_mutation = 'on'`);
    let prev = GENESIS_HASH;
    for (const e of events) {
      const payload = { ...(e.payload as object), text: 'rewritten' };
      const hash = chainHash(prev, canonicalEventJson({ ...e, payload }));
      await c.query('update events set payload = $2, prev_hash = $3, hash = $4 where event_id = $1', [
        e.eventId,
        JSON.stringify(payload),
        prev,
        hash,
      ]);
      prev = hash;
    }
    await c.query('update streams set last_hash = $2 where stream_id = $1', [streamId, prev]);
  });
}

/** The owner drops a stream's events after `keep` and moves its head back consistently. */
async function truncateTail(streamId: string, keep: number): Promise<void> {
  const last = await eventAt(streamId, keep);
  await inTransaction(owner, async (c) => {
    await c.query(`set local rods.allow_event_mutation = 'on'`);
    await c.query('delete from events where stream_id = $1 and stream_version > $2', [streamId, keep]);
    const { rows } = await c.query<{ hash: Buffer }>('select hash from events where event_id = $1', [
      last.eventId,
    ]);
    await c.query('update streams set version = $2, last_hash = $3 where stream_id = $1', [
      streamId,
      keep,
      rows[0]!.hash,
    ]);
  });
}

/** The owner deletes a stream: its events and its head. */
async function deleteStream(streamId: string): Promise<void> {
  await tamper('delete from events where stream_id = $1', [streamId]);
  await owner.query('delete from streams where stream_id = $1', [streamId]);
}

describe('rods audit anchor and verify against it', () => {
  it('passes an untouched store, and names each stream rewritten with a recomputed chain, truncated or deleted', async () => {
    const prefix = await twoStreams();
    for (const s of ['c', 'd'])
      await append(pool, `${prefix}/${s}`, 'no-stream', [
        newEvent('E0', { s }, { producer: 'audit-test' }),
        newEvent('E1', { s }, { producer: 'audit-test' }),
      ]);
    const anchor = await anchorCli(prefix);
    expect(anchor).toMatchObject({ algorithm: 'sha256', streamCount: 4 });
    expect(anchor.digest).toMatch(/^[0-9a-f]{64}$/);

    const clean = await verifyCli(prefix, anchor.anchorId);
    expect(clean.code).toBe(0);
    expect(clean.out).toMatchObject({
      ok: true,
      chain: { ok: true, streams: 4 },
      anchor: { ok: true, streams: 4 },
    });
    // Appending after the anchor is not a finding.
    await append(pool, `${prefix}/d`, 2, [newEvent('E2', {}, { producer: 'audit-test' })]);
    expect((await verifyCli(prefix, anchor.anchorId)).code).toBe(0);

    await rewriteWithChain(`${prefix}/a`);
    await truncateTail(`${prefix}/b`, 3);
    await deleteStream(`${prefix}/c`);
    // The attacks leave consistent chains: the chain check alone passes them.
    expect(await verifyChains(pool, { streamPrefix: prefix })).toMatchObject({ ok: true, streams: 3 });

    const r = await verifyCli(prefix, anchor.anchorId);
    expect(r.code).toBe(1);
    expect(r.out.ok).toBe(false);
    expect(r.out.chain.ok).toBe(true);
    const findings = Object.fromEntries(r.out.anchor!.findings.map((f) => [f.streamId, f]));
    expect(Object.keys(findings).sort()).toEqual([`${prefix}/a`, `${prefix}/b`, `${prefix}/c`]);
    expect(findings[`${prefix}/a`]).toMatchObject({
      problem: 'rewritten',
      anchoredVersion: 5,
      foundVersion: 5,
    });
    expect(findings[`${prefix}/b`]).toMatchObject({
      problem: 'truncated',
      anchoredVersion: 5,
      foundVersion: 3,
    });
    expect(findings[`${prefix}/c`]).toMatchObject({
      problem: 'deleted',
      anchoredVersion: 2,
      foundVersion: null,
    });

    const text = await cli(
      ['audit', 'verify', '--prefix', prefix, '--anchor', String(anchor.anchorId)],
      NO_KEY,
    );
    expect(text.code).toBe(1);
    expect(text.stdout).toContain(`REWRITTEN: stream ${prefix}/a`);
    expect(text.stdout).toContain(`TRUNCATED: stream ${prefix}/b`);
    expect(text.stdout).toContain(`DELETED: stream ${prefix}/c`);
    expect(text.stdout).not.toContain(`${prefix}/d:`);
  });

  it('stores only the heads that changed since the anchor before, and verifies against the full set rebuilt from the chain', async () => {
    const prefix = await twoStreams();
    const stored = async (anchorId: number) =>
      (
        await pool.query<{ base: number | null; heads: [string, number, string][] }>(
          'select base_anchor_id as base, heads from audit_anchors where anchor_id = $1',
          [anchorId],
        )
      ).rows[0]!;
    const first = await anchorCli(prefix);
    expect(await stored(first.anchorId)).toMatchObject({
      base: null,
      heads: [
        [`${prefix}/a`, 5, expect.any(String)],
        [`${prefix}/b`, 5, expect.any(String)],
      ],
    });
    await append(pool, `${prefix}/b`, 5, [newEvent('E5', {}, { producer: 'audit-test' })]);
    await append(pool, `${prefix}/c`, 'no-stream', [newEvent('E0', {}, { producer: 'audit-test' })]);
    const second = await anchorCli(prefix);
    expect(second.streamCount).toBe(3);
    const row = await stored(second.anchorId);
    expect(row.base).toBe(first.anchorId);
    expect(row.heads.map((h) => [h[0], h[1]])).toEqual([
      [`${prefix}/b`, 6],
      [`${prefix}/c`, 1],
    ]);
    expect((await verifyCli(prefix, second.anchorId)).out.anchor).toMatchObject({ ok: true, streams: 3 });
    // A stream anchored by the base only is checked too: rewriting it is found through the chain.
    await rewriteWithChain(`${prefix}/a`);
    const r = await verifyCli(prefix, second.anchorId);
    expect(r.code).toBe(1);
    expect(r.out.anchor!.findings).toMatchObject([{ streamId: `${prefix}/a`, problem: 'rewritten' }]);
    // Editing the base's recorded heads breaks the digest of the anchor built on it.
    await inTransaction(owner, async (c) => {
      await c.query(`set local rods.allow_event_mutation = 'on'`);
      await c.query(`update audit_anchors set heads = heads - 0 where anchor_id = $1`, [first.anchorId]);
    });
    expect((await verifyCli(prefix, second.anchorId)).out.anchor).toMatchObject({
      ok: false,
      anchorProblem: 'digest-mismatch',
    });
    // A stream anchored before and gone now cannot be said by a change set: the next one is full.
    await deleteStream(`${prefix}/c`);
    const third = await anchorCli(prefix);
    expect((await stored(third.anchorId)).base).toBeNull();
    expect((await stored(third.anchorId)).heads).toHaveLength(2);
  });

  it('with RODS_AUDIT_HMAC_KEY, keys the anchor and reports a forged or unkeyed one', async () => {
    const key = { RODS_AUDIT_HMAC_KEY: `k-${randomUUID()}` };
    const prefix = await twoStreams();
    const genuine = await anchorCli(prefix, key);
    expect(genuine.algorithm).toBe('hmac-sha256');
    expect((await verifyCli(prefix, genuine.anchorId, key)).code).toBe(0);
    // Another key does not verify it.
    const wrongKey = await verifyCli(prefix, genuine.anchorId, { RODS_AUDIT_HMAC_KEY: 'guess' });
    expect(wrongKey.code).toBe(1);
    expect(wrongKey.out.anchor).toMatchObject({ ok: false, anchorProblem: 'forged' });

    // The attacker rewrites a stream and records an anchor of the new state: without the key it
    // can only be unkeyed (or keyed with a guess); both are reported as forged.
    await rewriteWithChain(`${prefix}/a`);
    const unkeyed = await anchorCli(prefix, NO_KEY);
    const r1 = await verifyCli(prefix, unkeyed.anchorId, key);
    expect(r1.code).toBe(1);
    expect(r1.out.anchor).toMatchObject({ ok: false, anchorProblem: 'forged', findings: [] });
    expect(r1.out.anchor!.anchorDetail).toContain('not keyed');
    const guessed = await anchorCli(prefix, { RODS_AUDIT_HMAC_KEY: 'guess' });
    const r2 = await verifyCli(prefix, guessed.anchorId, key);
    expect(r2.code).toBe(1);
    expect(r2.out.anchor).toMatchObject({ ok: false, anchorProblem: 'forged' });
    // The genuine anchor still names the rewritten stream.
    const r3 = await verifyCli(prefix, genuine.anchorId, key);
    expect(r3.code).toBe(1);
    expect(r3.out.anchor!.findings).toMatchObject([{ streamId: `${prefix}/a`, problem: 'rewritten' }]);

    // The owner edits the genuine anchor's recorded heads to match the rewrite: the MAC breaks.
    const heads = (
      await owner.query<{ heads: [string, number, string][] }>(
        'select heads from audit_anchors where anchor_id = $1',
        [genuine.anchorId],
      )
    ).rows[0]!.heads;
    const { rows } = await pool.query<{ hash: Buffer }>(
      'select hash from events where stream_id = $1 and stream_version = 5',
      [`${prefix}/a`],
    );
    const edited = heads.map((h) =>
      h[0] === `${prefix}/a` ? [h[0], h[1], rows[0]!.hash.toString('hex')] : h,
    );
    await inTransaction(owner, async (c) => {
      await c.query(`set local rods.allow_event_mutation = 'on'`);
      await c.query('update audit_anchors set heads = $2 where anchor_id = $1', [
        genuine.anchorId,
        JSON.stringify(edited),
      ]);
    });
    const r4 = await verifyCli(prefix, genuine.anchorId, key);
    expect(r4.code).toBe(1);
    expect(r4.out.anchor).toMatchObject({ ok: false, anchorProblem: 'forged', findings: [] });
  });

  it('publishes the anchor on Kafka, and --kafka catches an anchor the table has but Kafka does not', async () => {
    const prefix = await twoStreams();
    const anchor = await anchorCli(prefix);
    const published = await readPublishedAnchors();
    // Other stores (other test stacks) may publish anchors with the same id to the same topic.
    const storeId = await auditStoreId(pool);
    expect(published.find((a) => a.anchorId === anchor.anchorId && a.storeId === storeId)).toMatchObject({
      streamPrefix: prefix,
      digest: anchor.digest,
      algorithm: 'sha256',
      streamCount: 2,
    });
    const viaKafka = await cli(
      ['audit', 'verify', '--prefix', prefix, '--anchor', String(anchor.anchorId), '--kafka', '--json'],
      NO_KEY,
    );
    expect(viaKafka.code).toBe(0);

    // An anchor written straight into the table (the application's role may insert one) after a
    // rewrite has no copy on Kafka, and the table's copy of a published one cannot be altered.
    await rewriteWithChain(`${prefix}/b`);
    const [forged] = (
      await pool.query<{ id: number }>(
        `insert into audit_anchors (store_id, global_position, stream_prefix, stream_count, algorithm, digest, heads)
         select store_id, global_position, stream_prefix, stream_count, algorithm, digest, heads from audit_anchors where anchor_id = $1
         returning anchor_id as id`,
        [anchor.anchorId],
      )
    ).rows;
    const notPublished = await cli(
      ['audit', 'verify', '--prefix', prefix, '--anchor', String(forged!.id), '--kafka', '--json'],
      NO_KEY,
    );
    expect(notPublished.code).toBe(1);
    expect((JSON.parse(notPublished.stdout) as VerifyJson).anchor).toMatchObject({
      anchorProblem: 'not-published',
    });
  });
});

describe("the application's database role", () => {
  it('is refused an UPDATE and a DELETE on events, even with the trigger bypass, and cannot disable the trigger', async () => {
    const prefix = await twoStreams();
    const e = await eventAt(`${prefix}/a`, 2);
    const asApp = (sql: string, params: unknown[] = []) =>
      inTransaction(pool, async (c) => {
        await c.query(`set local rods.allow_event_mutation = 'on'`);
        await c.query(sql, params);
      });
    for (const sql of [
      `update events set payload = '{}' where event_id = $1`,
      'delete from events where event_id = $1',
    ]) {
      await expect(asApp(sql, [e.eventId])).rejects.toMatchObject({
        code: '42501',
        message: expect.stringContaining('permission denied for table events'),
      });
    }
    await expect(asApp('alter table events disable trigger events_append_only_rows')).rejects.toMatchObject({
      code: '42501',
      message: expect.stringContaining('must be owner of table events'),
    });
    await expect(asApp('truncate events')).rejects.toMatchObject({ code: '42501' });
    await expect(asApp('update audit_anchors set heads = heads')).rejects.toMatchObject({ code: '42501' });
    await expect(asApp('delete from audit_anchors')).rejects.toMatchObject({ code: '42501' });
    // What it must still do: append, and read.
    await append(pool, `${prefix}/a`, 5, [newEvent('E5', {}, { producer: 'audit-test' })]);
    expect((await verifyChains(pool, { streamId: `${prefix}/a` })).ok).toBe(true);
  });
});
