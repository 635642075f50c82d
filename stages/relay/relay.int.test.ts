import { type ChildProcess, spawn } from 'node:child_process';
import { createHash, randomUUID } from 'node:crypto';
import net from 'node:net';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Rng } from '../../dev/standin/rng.js';
import { decode, defaultRegistry } from '../../platform/codec/registry.js';
import { ensureTopics, openKafka, readUntil, withAdmin } from '../../platform/kafka/client.js';
import { DLQ_TOPIC } from '../../platform/kafka/dlq.js';
import { relayCheckpoint } from '../../platform/kafka/relay-checkpoint.js';
import { createPool } from '../../platform/store/db.js';
import { append, type Cursor, headCursor, type NewEvent } from '../../platform/store/events/event-store.js';
import { freePort } from '../../platform/util/free-port.js';
import { SAMPLE_EVENTS } from '../../test/support/codec/samples.js';
import { ROOT } from '../../test/support/sources.js';
import { staysFalse, waitUntil } from '../../test/support/wait.js';
import { headerNames, RECORD_LIMIT_RETRY_MS, Relay } from './relay.js';

const pool = createPool({ application: 'rods-relay-test', max: 4 });
const registry = defaultRegistry();
const fingerprint = registry.current('TaskSeeded')!.fingerprint;

function taskSeeded(streamId: string, n: number, task?: string): NewEvent {
  const eventId = randomUUID();
  return {
    eventId,
    type: 'TaskSeeded',
    fingerprint,
    payload: {
      ...SAMPLE_EVENTS.TaskSeeded,
      eventId,
      campaignId: streamId,
      taskId: `task-${n}`,
      poolVersion: n,
      ...(task !== undefined ? { task } : {}),
    },
    metadata: { producer: 'relay-test' },
  };
}

function startRelay(
  name: string,
  topic: string,
  startAfter: Cursor,
  extra: string[] = [],
  env: NodeJS.ProcessEnv = process.env,
): ChildProcess {
  return spawn(
    process.execPath,
    [
      path.join(ROOT, 'bin/rods.mjs'),
      'relay',
      '--name',
      name,
      '--topic',
      topic,
      '--batch-size',
      '40',
      '--poll-ms',
      '50',
      '--start-after',
      `${startAfter.transactionId}:${startAfter.position}`,
      // Other test files append to the same store meanwhile; this test reads back only its streams.
      '--stream-prefix',
      `relay-${name}`,
      ...extra,
    ],
    { cwd: ROOT, stdio: ['ignore', 'pipe', 'pipe'], env },
  );
}

function exited(child: ChildProcess): Promise<number | null> {
  return new Promise((resolve) => {
    if (child.exitCode !== null || child.signalCode !== null) resolve(child.exitCode);
    else child.once('exit', (code) => resolve(code));
  });
}

const topics: string[] = [];

beforeAll(async () => {
  await withAdmin((a) => ensureTopics(a));
});

afterAll(async () => {
  if (topics.length) await withAdmin((a) => a.deleteTopics(topics));
  await pool.end();
});

describe('outbox relay', () => {
  it('after 5 kill -9, each right after a committed checkpoint while events are appended, every stored event is on Kafka once, in stream order', async () => {
    const name = `test-${randomUUID().slice(0, 8)}`;
    const topic = `relay.test.${name}`;
    topics.push(topic);
    await withAdmin((a) =>
      ensureTopics(a, [
        { name: topic, key: 'campaign', partitions: 3, replicationFactor: 1, config: {}, doc: 'relay test' },
      ]),
    );
    const prefix = `relay-${name}`;
    const streams = Array.from({ length: 20 }, (_, i) => `${prefix}-s${i}`);
    const start = await headCursor(pool);

    // Appends keep going while the relay is being killed.
    const appended = new Map<string, string[]>(); // stream -> event ids in version order
    let appending = true;
    const appender = (async () => {
      // Spread over the whole kill phase (bounded: at most 6,000 events).
      for (let n = 0; appending && n < 6000; n += 2) {
        const s = streams[(n / 2) % streams.length]!;
        const batch = [taskSeeded(s, n), taskSeeded(s, n + 1)];
        await append(pool, s, 'any', batch);
        appended.set(s, [...(appended.get(s) ?? []), ...batch.map((e) => e.eventId)]);
        await new Promise((r) => setTimeout(r, 5));
      }
    })();

    let kills = 0;
    // Each run is killed right after it committed its n-th checkpoint (n from a seeded source, so
    // a failure replays the same kill points), i.e. between two transactions while appends flow.
    const rng = new Rng('relay-kill');
    await withAdmin(async (admin) => {
      for (let i = 0; i < 5; i++) {
        const commits = rng.int(1, 3);
        let last = (await relayCheckpoint(admin, name)).position;
        let committed = 0;
        const child = startRelay(name, topic, start);
        await waitUntil(
          async () => {
            if (child.exitCode !== null) throw new Error(`relay run ${i} exited with ${child.exitCode}`);
            const cp = (await relayCheckpoint(admin, name)).position;
            if (cp !== last) committed++;
            last = cp;
            return committed >= commits;
          },
          { what: () => `relay run ${i} to commit ${commits} checkpoints (${committed} seen)` },
        );
        child.kill('SIGKILL');
        await exited(child);
        kills++;
      }
    });
    appending = false;
    await appender;
    expect(kills).toBe(5);

    // A last run drains what is left and exits.
    const final = startRelay(name, topic, start, ['--until-caught-up']);
    let stderr = '';
    final.stderr!.on('data', (d) => {
      stderr += d;
    });
    expect(await exited(final), stderr).toBe(0);

    const total = [...appended.values()].reduce((a, l) => a + l.length, 0);
    const checkpoint = await withAdmin((a) => relayCheckpoint(a, name));
    expect(checkpoint.position).toBeGreaterThan(start.position);

    // Read everything committed on the topic.
    const seen: { stream: string; eventId: string; version: number; position: number }[] = [];
    const c = openKafka({ clientId: 'relay-test' }).batchConsumer({
      groupId: `relay-test-${randomUUID()}`,
      topics: [topic],
      readCommitted: true,
    });
    const mine = () => seen.filter((s) => s.stream.startsWith(prefix)).length;
    let failure: unknown;
    /** Records of this test read back so far; a failure of the reader ends the wait at once. */
    const readBack = () => {
      if (failure) throw failure;
      return mine();
    };
    await c
      .run(async (batch, { heartbeat }) => {
        for (const m of batch.records) {
          const h = (k: string) => m.headers[k]?.toString() ?? '';
          // Other test files append to the same store concurrently; only this test's streams count.
          if (!h(headerNames.stream).startsWith(prefix)) continue;
          const decoded = registry.decode(m.value!);
          if (decoded.name !== 'TaskSeeded') {
            failure = new Error(`relayed ${decoded.name} for a TaskSeeded event`);
            return;
          }
          seen.push({
            stream: h(headerNames.stream),
            eventId: h(headerNames.eventId),
            version: Number(h(headerNames.version)),
            position: Number(h(headerNames.position)),
          });
        }
        await heartbeat();
      })
      .catch((e: unknown) => {
        failure = e;
      });
    try {
      await waitUntil(() => readBack() >= total, {
        what: () => `all ${total} relayed events to be read back (${mine()} so far)`,
        timeoutMs: 90_000,
      });
      // A duplicate, if any, shows up as one record too many: watch for it for a while.
      await staysFalse(() => readBack() > total, 1500, {
        what: () => `read back ${mine()} records for ${total} relayed events`,
      });
    } finally {
      await c.disconnect();
    }

    const relayed = seen.filter((s) => s.stream.startsWith(prefix));
    // Exactly once: no duplicate event id, nothing missing.
    expect(new Set(relayed.map((r) => r.eventId)).size).toBe(relayed.length);
    expect(relayed.length).toBe(total);
    // Stream order per key: each stream's versions arrive as 1, 2, 3, ...
    for (const s of streams) {
      const versions = relayed.filter((r) => r.stream === s).map((r) => r.version);
      expect(versions).toEqual(Array.from({ length: appended.get(s)!.length }, (_, i) => i + 1));
      expect(relayed.filter((r) => r.stream === s).map((r) => r.eventId)).toEqual(appended.get(s));
    }
    // Five relay start-ups and the drain of what was appended meanwhile: on a loaded machine this
    // outlasts the default test timeout.
  }, 300_000);

  it('run untilCaughtUp waits for events hidden behind a transaction still open elsewhere, then publishes them', async () => {
    const name = `test-caught-up-${randomUUID().slice(0, 8)}`;
    const topic = `relay.test.${name}`;
    topics.push(topic);
    await withAdmin((a) =>
      ensureTopics(a, [
        { name: topic, key: 'campaign', partitions: 1, replicationFactor: 1, config: {}, doc: 'relay test' },
      ]),
    );
    const stream = `relay-${name}`;
    const start = await headCursor(pool);
    // An open transaction holding a transaction id (as a slow writer elsewhere would): events
    // committed after it began are invisible to readers until it ends.
    const holder = await pool.connect();
    let routed = 0;
    let finished = false;
    try {
      await holder.query('begin');
      await holder.query('select pg_current_xact_id()');
      await append(pool, stream, 'no-stream', [taskSeeded(stream, 1), taskSeeded(stream, 2)]);
      const relay = new Relay(pool, {
        name,
        startAfter: start,
        streamPrefix: stream,
        route: (e) => {
          if (e.streamId === stream) routed++;
          return { topic, key: e.streamId };
        },
      });
      await relay.start();
      const run = relay.run({ untilCaughtUp: true }).finally(() => {
        finished = true;
      });
      try {
        await staysFalse(() => finished, 1500, {
          what: 'the relay stopping before the hidden events are visible',
        });
        await holder.query('commit');
        await run;
      } finally {
        await relay.stop();
      }
    } finally {
      await holder.query('rollback').catch(() => {});
      holder.release();
    }
    expect(routed).toBe(2);
  });

  it('sends a stored event it cannot encode to the DLQ with the reason, in the same transaction, and moves on', async () => {
    const name = `test-dlq-${randomUUID().slice(0, 8)}`;
    const topic = `relay.test.${name}`;
    topics.push(topic);
    await withAdmin((a) =>
      ensureTopics(a, [
        { name: topic, key: 'campaign', partitions: 1, replicationFactor: 1, config: {}, doc: 'relay test' },
      ]),
    );
    const stream = `relay-${name}`;
    const start = await headCursor(pool);
    const bad: NewEvent = { ...taskSeeded(stream, 1), fingerprint: '00000000deadbeef' };
    // A payload its schema refuses, on purpose (the write path's types would not allow it).
    const worse = {
      ...taskSeeded(stream, 2),
      payload: { campaignId: stream, poolVersion: 'not a number' },
    } as unknown as NewEvent;
    const good = taskSeeded(stream, 3);
    const r = await append(pool, stream, 'no-stream', [bad, worse, good]);

    // The good event is routed in the same page as, or a later page than, the two bad ones (one
    // append, one store transaction). Positions alone do not say when the relay passed them: the
    // read order is by store transaction first, and other test files append concurrently.
    let goodRouted = false;
    const relay = new Relay(pool, {
      name,
      startAfter: start,
      route: (e) => {
        if (e.eventId === good.eventId) goodRouted = true;
        return { topic, key: e.streamId };
      },
    });
    await relay.start();
    try {
      while (!goodRouted) await relay.step();
    } finally {
      await relay.stop();
    }
    expect(relay.stats.deadLettered).toBeGreaterThanOrEqual(2);

    const letters: { reasonCode: string; reason: string; offset: number }[] = [];
    await readUntil(DLQ_TOPIC, (message) => {
      const d = decode(message.value!);
      if (d.name !== 'DeadLettered' || !d.payload.reason.includes(stream)) return false;
      letters.push({
        reasonCode: d.payload.reasonCode,
        reason: d.payload.reason,
        offset: d.payload.offset,
      });
      return letters.length >= 2;
    });
    const byOffset = new Map(letters.map((l) => [l.offset, l]));
    expect(byOffset.get(r.positions[0]!)?.reasonCode).toBe('relay-unknown-event');
    expect(byOffset.get(r.positions[0]!)?.reason).toContain('00000000deadbeef');
    expect(byOffset.get(r.positions[1]!)?.reasonCode).toBe('relay-invalid-payload');
    expect(byOffset.get(r.positions[1]!)?.reason).toContain('poolVersion');
    expect(byOffset.has(r.positions[2]!)).toBe(false);
  });

  it('publishes an event larger than the broker limit as an EventReferenced record that fits, and keeps publishing what follows', async () => {
    const name = `test-big-${randomUUID().slice(0, 8)}`;
    const topic = `relay.test.${name}`;
    topics.push(topic);
    // The topic takes 128 KiB records: below the relay's default limit (1 MB), so the middle
    // event is refused by the broker first and the relay must lower its limit itself.
    await withAdmin((a) =>
      ensureTopics(a, [
        {
          name: topic,
          key: 'campaign',
          partitions: 1,
          replicationFactor: 1,
          config: { 'max.message.bytes': String(128 * 1024) },
          doc: 'relay test',
        },
      ]),
    );
    const stream = `relay-${name}`;
    const start = await headCursor(pool);
    const events = [
      taskSeeded(stream, 1),
      taskSeeded(stream, 2, 'x'.repeat(11 * 1024 * 1024)), // over the broker's 10 MiB message.max.bytes
      taskSeeded(stream, 3, 'y'.repeat(300 * 1024)), // over the topic's 128 KiB only
      taskSeeded(stream, 4),
    ];
    await append(pool, stream, 'no-stream', events.slice(0, 2));
    await append(pool, stream, 2, events.slice(2));

    let clock = Date.now();
    const relay = new Relay(pool, {
      name,
      startAfter: start,
      streamPrefix: stream,
      route: (e) => ({ topic, key: e.streamId }),
      now: () => clock,
    });
    const configured = relay.stats.recordLimit;
    const ac = new AbortController();
    let failure: unknown;
    const running = relay.run({ signal: ac.signal }).catch((e: unknown) => {
      failure = e;
    });
    const got: { version: number; name: string; payload: Record<string, unknown>; referenced: string }[] = [];
    try {
      await readUntil(
        topic,
        (m) => {
          if (failure) throw failure;
          const d = registry.decode(m.value!);
          got.push({
            version: Number(m.headers[headerNames.version]?.toString()),
            name: d.name,
            payload: d.payload as unknown as Record<string, unknown>,
            referenced: m.headers[headerNames.referenced]?.toString() ?? '',
          });
          return got.length >= events.length;
        },
        { timeoutMs: 60_000 },
      ).catch((e: Error) => {
        throw new Error(
          `${got.length} of ${events.length} events relayed (${(failure as Error) ?? e.message})`,
        );
      });
      // The broker refused a size: the limit went down. It is not kept for ever: once
      // RECORD_LIMIT_RETRY_MS passed, the next committed page brings the configured one back.
      expect(relay.stats.recordLimit).toBeLessThan(configured);
      clock += RECORD_LIMIT_RETRY_MS;
      await append(pool, stream, 4, [taskSeeded(stream, 5)]);
      await waitUntil(() => relay.stats.recordLimit === configured, {
        what: () => `the record limit back at ${configured} (now ${relay.stats.recordLimit})`,
        timeoutMs: 30_000,
      });
    } finally {
      ac.abort();
      await running;
      await relay.stop();
    }
    expect(got.slice(0, 4).map((g) => [g.version, g.name, g.referenced])).toEqual([
      [1, 'TaskSeeded', ''],
      [2, 'EventReferenced', '1'],
      [3, 'EventReferenced', '1'],
      [4, 'TaskSeeded', ''],
    ]);
    expect(relay.stats.referenced).toBe(2);
    for (const i of [1, 2]) {
      const ref = got[i]!.payload;
      const e = events[i]!;
      const value = registry.encodeWith(e.fingerprint, e.payload);
      expect(ref).toMatchObject({
        eventId: e.eventId,
        campaignId: stream,
        eventType: 'TaskSeeded',
        fingerprint: e.fingerprint,
        streamId: stream,
        streamVersion: i + 1,
        valueBytes: value.length,
        valueSha256: createHash('sha256').update(value).digest('hex'),
      });
    }
    expect(got[1]!.payload.valueBytes).toBeGreaterThan(10 * 1024 * 1024);
  }, 180_000);

  it('keeps retrying with backoff while Kafka cannot be reached, instead of exiting, and publishes once it can', async () => {
    const name = `test-away-${randomUUID().slice(0, 8)}`;
    const topic = `relay.test.${name}`;
    topics.push(topic);
    await withAdmin((a) =>
      ensureTopics(a, [
        { name: topic, key: 'campaign', partitions: 1, replicationFactor: 1, config: {}, doc: 'relay test' },
      ]),
    );
    const stream = `relay-${name}`;
    const start = await headCursor(pool);
    const event = taskSeeded(stream, 1);
    await append(pool, stream, 'no-stream', [event]);

    // The relay bootstraps through a port where nothing listens yet, then through a proxy to the
    // real broker (which it then reaches directly, at its advertised address).
    const port = await freePort();
    const real = (process.env.KAFKA_BROKERS ?? '127.0.0.1:9092').split(',')[0]!;
    const [host, realPort] = [
      real.slice(0, real.lastIndexOf(':')),
      Number(real.slice(real.lastIndexOf(':') + 1)),
    ];
    const child = startRelay(name, topic, start, [], { ...process.env, KAFKA_BROKERS: `127.0.0.1:${port}` });
    let stderr = '';
    child.stderr!.on('data', (d) => {
      stderr += d;
    });
    const proxy = net.createServer((socket) => {
      const upstream = net.connect(realPort, host);
      socket.pipe(upstream).pipe(socket);
      const close = () => {
        socket.destroy();
        upstream.destroy();
      };
      socket.on('error', close);
      upstream.on('error', close);
    });
    try {
      await waitUntil(
        () => {
          if (child.exitCode !== null) throw new Error(`relay exited with ${child.exitCode}: ${stderr}`);
          return /restarting the session \(2,/.test(stderr);
        },
        { what: () => `the relay to retry its session twice (stderr: ${stderr})`, timeoutMs: 240_000 },
      );
      await new Promise<void>((resolve) => proxy.listen(port, '127.0.0.1', resolve));
      await readUntil(topic, (m) => m.headers[headerNames.eventId]?.toString() === event.eventId, {
        timeoutMs: 120_000,
      });
      expect(child.exitCode).toBeNull();
    } finally {
      child.kill('SIGTERM');
      await exited(child);
      await new Promise((r) => proxy.close(r));
    }
  }, 420_000);
});
