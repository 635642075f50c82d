import { execFile } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { afterAll, describe, expect, it } from 'vitest';
import { type AuditResult, verifyChains } from './audit.js';
import { canonicalEventJson, chainHash } from './canonical.js';
import { createPool, inTransaction } from './db.js';
import { append, readStream } from './event-store.js';
import { newEvent } from './test-helpers.js';

const pool = createPool({ application: 'rods-test-audit', max: 4 });
const prefixes: string[] = [];
afterAll(async () => {
  // Remove this file's streams (tampered ones included) so a global `rods audit verify` stays clean.
  await inTransaction(pool, async (c) => {
    await c.query(`set local rods.allow_event_mutation = 'on'`);
    for (const p of prefixes) {
      await c.query('delete from events where starts_with(stream_id, $1)', [p]);
      await c.query('delete from streams where starts_with(stream_id, $1)', [p]);
    }
  });
  await pool.end();
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

/** Runs SQL as the 'attacker': a session that knows the documented bypass of the append-only trigger. */
async function tamper(sql: string, params: unknown[]): Promise<void> {
  await inTransaction(pool, async (c) => {
    await c.query(`set local rods.allow_event_mutation = 'on'`);
    await c.query(sql, params);
  });
}

async function eventAt(streamId: string, version: number) {
  const e = (await readStream(pool, streamId, { fromVersion: version, limit: 1 }))[0];
  if (!e) throw new Error(`no event ${streamId}@${version}`);
  return e;
}

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');

async function cli(args: string[]): Promise<{ code: number; stdout: string }> {
  try {
    const { stdout } = await promisify(execFile)(process.execPath, ['bin/rods.mjs', ...args], { cwd: ROOT });
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
    await pool.query('delete from streams where stream_id = $1', [`${prefix}/b`]);
    expect(await verifyChains(pool, { streamId: `${prefix}/b` })).toMatchObject({
      ok: false,
      problem: 'head-mismatch',
    });
  });
});

describe('rods audit verify', () => {
  it('prints the count and exits 0 when clean, names the broken link and exits 1 when not', async () => {
    const prefix = await twoStreams();
    const clean = await cli(['audit', 'verify', '--prefix', prefix]);
    expect(clean).toEqual({ code: 0, stdout: 'ok: 10 events checked in 2 streams\n' });
    expect(await cli(['audit', 'verify', '--stream', `${prefix}/a`])).toEqual({
      code: 0,
      stdout: `ok: 5 events checked in stream ${prefix}/a\n`,
    });

    const target = await eventAt(`${prefix}/a`, 4);
    await tamper(`update events set payload = '{}' where event_id = $1`, [target.eventId]);
    const broken = await cli(['audit', 'verify', '--stream', `${prefix}/a`]);
    expect(broken.code).toBe(1);
    expect(broken.stdout).toContain(`stream ${prefix}/a version 4 event ${target.eventId}`);
    expect(broken.stdout).toContain('hash-mismatch');

    const json = await cli(['audit', 'verify', '--prefix', prefix, '--json']);
    expect(json.code).toBe(1);
    const parsed = JSON.parse(json.stdout) as AuditResult;
    expect(parsed).toMatchObject({ ok: false, streamId: `${prefix}/a`, version: 4, eventId: target.eventId });
  });
});
