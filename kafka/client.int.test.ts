import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Consumer, consumer, ensureTopics, kafka, producer, withAdmin } from './client.js';

const k = kafka({ clientId: 'rods-smoke' });
const topics: string[] = [];

async function freshTopic(prefix: string, partitions: number): Promise<string> {
  const name = `smoke.${prefix}.${randomUUID().slice(0, 8)}`;
  await withAdmin((a) =>
    ensureTopics(a, [{ name, key: 'test', partitions, replicationFactor: 1, config: {}, doc: 'smoke test' }]),
  );
  topics.push(name);
  return name;
}

/** Consumes until `count` records arrived (or fails after the hook timeout). */
async function collect(
  c: Consumer,
  topic: string,
  count: number,
): Promise<{ key: string; value: string; partition: number; offset: string }[]> {
  const seen: { key: string; value: string; partition: number; offset: string }[] = [];
  await c.connect();
  await c.subscribe({ topic, fromBeginning: true });
  await new Promise<void>((resolve, reject) => {
    c.run({
      eachBatch: async ({ batch, resolveOffset, heartbeat }) => {
        for (const m of batch.messages) {
          seen.push({
            key: m.key!.toString(),
            value: m.value!.toString(),
            partition: batch.partition,
            offset: m.offset,
          });
          resolveOffset(m.offset);
        }
        await heartbeat();
        if (seen.length >= count) resolve();
      },
    }).catch(reject);
  });
  return seen;
}

beforeAll(async () => {
  await withAdmin(async (a) => a.describeCluster());
});

afterAll(async () => {
  if (topics.length > 0) await withAdmin((a) => a.deleteTopics({ topics }));
});

describe('Kafka smoke (kafkajs against the real broker)', () => {
  it('10,000 keyed messages arrive once each through a consumer group, in order per key', async () => {
    const topic = await freshTopic('keyed', 6);
    const keys = 50;
    const perKey = 200;
    const p = producer(k, { idempotent: true, maxInFlightRequests: 1 });
    await p.connect();
    // Interleave keys so that per-key order is a real property of partitioning, not of batching.
    for (let seq = 0; seq < perKey; seq += 20) {
      const messages = [];
      for (let s = seq; s < seq + 20; s++) {
        for (let key = 0; key < keys; key++) messages.push({ key: `task-${key}`, value: `${key}:${s}` });
      }
      await p.send({ topic, acks: -1, messages });
    }
    await p.disconnect();

    const c = consumer(k, { groupId: `smoke-${randomUUID()}` });
    try {
      const seen = await collect(c, topic, keys * perKey);
      expect(seen).toHaveLength(keys * perKey);
      expect(new Set(seen.map((m) => m.value)).size).toBe(keys * perKey);
      const byKey = new Map<string, number[]>();
      const partitionOf = new Map<string, number>();
      for (const m of seen) {
        const [, s] = m.value.split(':');
        byKey.set(m.key, [...(byKey.get(m.key) ?? []), Number(s)]);
        // A key lives on exactly one partition.
        expect(partitionOf.get(m.key) ?? m.partition).toBe(m.partition);
        partitionOf.set(m.key, m.partition);
      }
      expect(byKey.size).toBe(keys);
      for (const seqs of byKey.values()) {
        expect(seqs).toEqual(Array.from({ length: perKey }, (_, i) => i));
      }
      expect(new Set(partitionOf.values()).size).toBeGreaterThan(1);
    } finally {
      await c.disconnect();
    }
  });

  it('a committed transaction with sendOffsets is visible and moves the group offset; an aborted one is not seen read-committed', async () => {
    const source = await freshTopic('tx-source', 1);
    const sink = await freshTopic('tx-sink', 1);
    const groupId = `smoke-tx-${randomUUID()}`;

    const plain = producer(k);
    await plain.connect();
    await plain.send({
      topic: source,
      messages: [
        { key: 'a', value: 'in-0' },
        { key: 'a', value: 'in-1' },
      ],
    });
    await plain.disconnect();

    const tp = producer(k, {
      transactionalId: `smoke-tx-${randomUUID()}`,
      idempotent: true,
      maxInFlightRequests: 1,
    });
    await tp.connect();
    // Committed: output plus the consumed position (next offset = last + 1) in one transaction.
    const committed = await tp.transaction();
    await committed.send({ topic: sink, messages: [{ key: 'a', value: 'committed-out' }] });
    await committed.sendOffsets({
      consumerGroupId: groupId,
      topics: [{ topic: source, partitions: [{ partition: 0, offset: '2' }] }],
    });
    await committed.commit();
    // Aborted: nothing of it may be visible to a read-committed reader.
    const aborted = await tp.transaction();
    await aborted.send({ topic: sink, messages: [{ key: 'a', value: 'aborted-out' }] });
    await aborted.abort();
    // A later committed record proves the reader got past the aborted one.
    const last = await tp.transaction();
    await last.send({ topic: sink, messages: [{ key: 'a', value: 'committed-last' }] });
    await last.commit();
    await tp.disconnect();

    const offsets = await withAdmin((a) => a.fetchOffsets({ groupId, topics: [source] }));
    expect(offsets[0]?.partitions[0]?.offset).toBe('2');

    const rc = consumer(k, { groupId: `smoke-rc-${randomUUID()}`, readUncommitted: false });
    try {
      const seen = await collect(rc, sink, 2);
      expect(seen.map((m) => m.value)).toEqual(['committed-out', 'committed-last']);
    } finally {
      await rc.disconnect();
    }
    // Control: a read-uncommitted reader does see the aborted record, so the check above is meaningful.
    const ru = consumer(k, { groupId: `smoke-ru-${randomUUID()}`, readUncommitted: true });
    try {
      const seen = await collect(ru, sink, 3);
      expect(seen.map((m) => m.value)).toContain('aborted-out');
    } finally {
      await ru.disconnect();
    }
  });
});
