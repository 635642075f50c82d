import { randomUUID } from 'node:crypto';
import type pg from 'pg';
import { afterAll, describe, expect, inject, it } from 'vitest';
import { eventually, newEvent } from '../../test/support/store/events.js';
import { createPool } from './db.js';
import { append, compareCursors, cursorAt, headCursor, type RecordedEvent } from './events/event-store.js';
import {
  catchUp,
  type Projection,
  projectionRunner,
  readCheckpoint,
  rebuild,
  setCheckpoint,
} from './projections.js';

const pool = createPool({ application: 'rods-test-projections', max: 8 });
// The example projection's tables are made and dropped by the owner role (the application's role
// cannot create tables); its default privileges let the application's role write them.
const endpoints = inject('endpoints');
const owner = createPool({ connectionString: endpoints.ownerDatabaseUrl ?? endpoints.databaseUrl, max: 2 });
const cleanups: Array<() => Promise<unknown>> = [];
afterAll(async () => {
  for (const f of cleanups) await f();
  await pool.end();
  await owner.end();
});

/**
 * Example projection: per stream, the number of events, the last type and the last version, for
 * the streams of one test (prefix). `applied` records every position it applied, with a primary
 * key, so applying an event twice fails loudly.
 */
function streamCounts(
  prefix: string,
  opts: { failOn?: string } = {},
): Projection & { table: string; appliedTable: string } {
  const suffix = randomUUID().replaceAll('-', '').slice(0, 12);
  const table = `test_stream_counts_${suffix}`;
  const applied = `test_stream_applied_${suffix}`;
  const name = `test-stream-counts-${suffix}`;
  cleanups.push(async () => {
    await owner.query(`drop table if exists ${table}, ${applied}`);
    await pool.query('delete from projection_checkpoints where name = $1', [name]);
  });
  return {
    name,
    table,
    appliedTable: applied,
    async init() {
      await owner.query(
        `create table if not exists ${table} (
           stream_id text primary key, events int not null, last_type text not null, last_version bigint not null)`,
      );
      await owner.query(`create table if not exists ${applied} (position bigint primary key)`);
    },
    async apply(c: pg.PoolClient, e: RecordedEvent) {
      if (!e.streamId.startsWith(prefix)) return;
      if (opts.failOn && e.type === opts.failOn) throw new Error(`refusing ${e.type}`);
      await c.query(`insert into ${applied} (position) values ($1)`, [e.position]);
      await c.query(
        `insert into ${table} (stream_id, events, last_type, last_version) values ($1, 1, $2, $3)
         on conflict (stream_id) do update
           set events = ${table}.events + 1, last_type = excluded.last_type, last_version = excluded.last_version`,
        [e.streamId, e.type, e.version],
      );
    },
    async reset(c: pg.PoolClient) {
      await c.query(`delete from ${table}`);
      await c.query(`delete from ${applied}`);
    },
  };
}

/** Only events appended after this point matter to a test: skip the rest of the shared log. */
async function startFromNow(p: Projection): Promise<void> {
  await setCheckpoint(pool, p.name, await headCursor(pool));
}

async function rows(table: string) {
  const r = await pool.query(
    `select stream_id, events, last_type, last_version from ${table} order by stream_id`,
  );
  return r.rows;
}

/** Appends n events round-robin over the streams; returns the last position and expected rows. */
async function seed(prefix: string, streams: number, n: number) {
  const versions = new Map<string, number>();
  const expected = new Map<string, { events: number; last_type: string; last_version: number }>();
  let last = 0;
  for (let i = 0; i < n; i++) {
    const s = `${prefix}/${i % streams}`;
    const type = `T${i % 3}`;
    const r = await append(pool, s, versions.get(s) ?? 'no-stream', [newEvent(type, { i })]);
    versions.set(s, r.nextExpectedVersion);
    expected.set(s, {
      events: (expected.get(s)?.events ?? 0) + 1,
      last_type: type,
      last_version: r.nextExpectedVersion,
    });
    last = r.positions[0]!;
  }
  const table = [...expected.entries()]
    .sort(([a], [b]) => (a < b ? -1 : 1))
    .map(([stream_id, v]) => ({ stream_id, ...v }));
  return { last, table };
}

describe('projection runner', () => {
  it('catches up, and a rebuild from position zero gives the same rows', async () => {
    const prefix = `pj-rebuild-${randomUUID()}`;
    const p = streamCounts(prefix);
    await startFromNow(p);
    const first = await seed(prefix, 4, 23);
    const live = await catchUp(pool, p, { batchSize: 5, until: first.last });
    expect(live.applied).toBeGreaterThanOrEqual(23);
    expect(await rows(p.table)).toEqual(first.table.sort((a, b) => (a.stream_id < b.stream_id ? -1 : 1)));
    const liveRows = await rows(p.table);

    const rebuilt = await rebuild(pool, p, { batchSize: 200, until: first.last });
    expect(rebuilt.applied).toBeGreaterThanOrEqual(23);
    expect(await rows(p.table)).toEqual(liveRows);

    // The checkpoint moved with the rebuild: catching up again applies only new events.
    const s = `${prefix}/0`;
    const more = await append(pool, s, 'any', [newEvent('Late', {})]);
    await catchUp(pool, p, { until: more.positions[0] });
    const after = await rows(p.table);
    expect(after.find((r) => r.stream_id === s)).toMatchObject({
      events: 7,
      last_type: 'Late',
      last_version: 7,
    });
    const cp = await readCheckpoint(pool, p.name);
    expect(cp.position).toBeGreaterThan(0);
  });

  it('two runners racing on one projection never apply an event twice', async () => {
    const prefix = `pj-race-${randomUUID()}`;
    const p = streamCounts(prefix);
    await startFromNow(p);
    const { last, table } = await seed(prefix, 3, 60);
    // Each runner works in batches of 3 events, so they interleave over the 60 events.
    const [a, b] = await Promise.all([
      catchUp(pool, p, { batchSize: 3, until: last, pollMs: 10 }),
      catchUp(pool, p, { batchSize: 3, until: last, pollMs: 10 }),
    ]);
    expect(a.applied + b.applied).toBeGreaterThanOrEqual(60);
    expect(await rows(p.table)).toEqual(table);
    const applied = await pool.query(`select count(*)::int as n from ${p.appliedTable}`);
    expect(applied.rows[0].n).toBe(60);
  });

  it('applies a batch and its checkpoint atomically: a failing event leaves neither', async () => {
    const prefix = `pj-atomic-${randomUUID()}`;
    const rules: { failOn?: string } = { failOn: 'Poison' };
    const p = streamCounts(prefix, rules);
    await startFromNow(p);
    const { last } = await seed(prefix, 2, 4);
    await catchUp(pool, p, { until: last });
    const before = await rows(p.table);
    const cpBefore = await readCheckpoint(pool, p.name);

    const s = `${prefix}/0`;
    const ok = await append(pool, s, 'any', [newEvent('Fine', {})]);
    const poison = await append(pool, s, 'any', [newEvent('Poison', {})]);
    expect(poison.positions[0]).toBeGreaterThan(ok.positions[0]!);
    await expect(catchUp(pool, p, { batchSize: 1000, until: poison.positions[0] })).rejects.toThrow(
      'refusing Poison',
    );
    // "Fine" was in the same batch as "Poison": not applied, checkpoint unchanged.
    expect(await rows(p.table)).toEqual(before);
    expect(await readCheckpoint(pool, p.name)).toEqual(cpBefore);

    // Once the projection accepts the event, it resumes from the checkpoint: each event once.
    rules.failOn = undefined;
    await catchUp(pool, p, { until: poison.positions[0] });
    expect((await rows(p.table)).find((r) => r.stream_id === s)).toMatchObject({
      events: 4,
      last_type: 'Poison',
      last_version: 4,
    });
  });

  it('looks projections up by name', async () => {
    const prefix = `pj-named-${randomUUID()}`;
    const p = streamCounts(prefix);
    await startFromNow(p);
    const runner = projectionRunner(pool, [p]);
    expect(runner.names()).toEqual([p.name]);
    const { last, table } = await seed(prefix, 2, 5);
    await runner.catchUp(p.name, { until: last });
    expect(await rows(p.table)).toEqual(table);
    await runner.rebuild(p.name, { until: last });
    expect(await rows(p.table)).toEqual(table);
    expect((await runner.checkpoint(p.name)).position).toBeGreaterThan(0);
    expect(() => runner.catchUp('nope')).toThrow(/unknown projection/);
  });

  it('runProjection keeps up until aborted', async () => {
    const prefix = `pj-run-${randomUUID()}`;
    const p = streamCounts(prefix);
    await startFromNow(p);
    const runner = projectionRunner(pool, [p]);
    const ctl = new AbortController();
    const running = runner.run(p.name, { pollMs: 20, signal: ctl.signal });
    const { last, table } = await seed(prefix, 2, 6);
    // Wait (bounded) until the running runner's checkpoint has passed the last event.
    const target = await cursorAt(pool, last);
    const cp = await eventually(
      () => runner.checkpoint(p.name),
      (c) => compareCursors(c, target) >= 0,
    );
    expect(compareCursors(cp, target)).toBeGreaterThanOrEqual(0);
    ctl.abort();
    await running;
    expect(await rows(p.table)).toEqual(table);
  });
});
