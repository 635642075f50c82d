// The Kafka port's contract as tests, run by each adapter's *.int.test.ts against the real
// broker (platform/kafka/README.md). Every test uses its own topics and groups and deletes the topics.
import { randomUUID } from 'node:crypto';
import { afterAll, describe, expect, it } from 'vitest';
import { ensureTopics, TopicSettingsError } from '../../../platform/kafka/client.js';
import type {
  BatchConsumerOptions,
  ConsumedRecord,
  KafkaClient,
  KafkaOptions,
  TopicAdmin,
} from '../../../platform/kafka/port.js';

interface Seen {
  partition: number;
  offset: string;
  key: string;
  value: string;
  headers: Record<string, string>;
}

function seen(partition: number, r: ConsumedRecord): Seen {
  return {
    partition,
    offset: r.offset,
    key: r.key?.toString() ?? '',
    value: r.value?.toString() ?? '',
    headers: Object.fromEntries(Object.entries(r.headers).map(([k, v]) => [k, v.toString()])),
  };
}

/** Runs a consumer until `count` records arrived, then disconnects it; returns them in arrival order. */
async function collect(
  client: KafkaClient,
  opts: Omit<BatchConsumerOptions, 'groupId'> & { groupId?: string },
  count: number,
  onBatch?: (records: Seen[]) => Promise<void>,
): Promise<Seen[]> {
  const out: Seen[] = [];
  const c = client.batchConsumer({ groupId: `contract-${randomUUID()}`, ...opts });
  try {
    await new Promise<void>((resolve, reject) => {
      c.run(async (batch, ctx) => {
        const got = batch.records.map((r) => seen(batch.partition, r));
        out.push(...got);
        await onBatch?.(got);
        await ctx.heartbeat();
        if (out.length >= count) resolve();
      }).catch(reject);
    });
  } finally {
    await c.disconnect();
  }
  return out;
}

export function describeKafkaPort(adapter: string, open: (opts: KafkaOptions) => KafkaClient): void {
  const client = open({ clientId: `rods-contract-${adapter}` });
  const topics: string[] = [];
  let admin: TopicAdmin | undefined;

  async function freshTopic(prefix: string, partitions: number): Promise<string> {
    const name = `contract.${prefix}.${randomUUID().slice(0, 8)}`;
    admin ??= await client.admin();
    await ensureTopics(admin, [
      { name, key: 'test', partitions, replicationFactor: 1, config: {}, doc: 'port contract test' },
    ]);
    topics.push(name);
    return name;
  }

  /** Produces `n` records v0..v(n-1) with key k to a topic. */
  async function produce(topic: string, n: number, from = 0): Promise<void> {
    const p = await client.producer();
    try {
      await p.send(
        topic,
        Array.from({ length: n }, (_, i) => ({ key: 'k', value: `v${from + i}` })),
      );
    } finally {
      await p.disconnect();
    }
  }

  afterAll(async () => {
    if (admin) {
      await admin.deleteTopics(topics);
      await admin.disconnect();
    }
  });

  describe(`Kafka port contract (${adapter} against the real broker)`, () => {
    it('10,000 keyed records arrive once each with their headers, in order per key, each key on one partition', async () => {
      const topic = await freshTopic('keyed', 6);
      const keys = 50;
      const perKey = 200;
      const p = await client.producer();
      // Interleave keys so that per-key order is a real property of partitioning, not of batching.
      for (let seq = 0; seq < perKey; seq += 20) {
        const records = [];
        for (let s = seq; s < seq + 20; s++) {
          for (let key = 0; key < keys; key++)
            records.push({
              key: `task-${key}`,
              value: Buffer.from(`${key}:${s}`),
              headers: { 'rods-seq': String(s), 'rods-bytes': Buffer.from([0xff, key]) },
            });
        }
        await p.send(topic, records);
      }
      await p.disconnect();

      const got = await collect(client, { topics: [topic] }, keys * perKey);
      expect(got).toHaveLength(keys * perKey);
      expect(new Set(got.map((m) => m.value)).size).toBe(keys * perKey);
      const byKey = new Map<string, number[]>();
      const partitionOf = new Map<string, number>();
      for (const m of got) {
        const [key, s] = m.value.split(':');
        expect(m.key).toBe(`task-${key}`);
        expect(m.headers['rods-seq']).toBe(s);
        byKey.set(m.key, [...(byKey.get(m.key) ?? []), Number(s)]);
        expect(partitionOf.get(m.key) ?? m.partition).toBe(m.partition);
        partitionOf.set(m.key, m.partition);
      }
      expect(byKey.size).toBe(keys);
      for (const seqs of byKey.values()) expect(seqs).toEqual(Array.from({ length: perKey }, (_, i) => i));
      expect(new Set(partitionOf.values()).size).toBeGreaterThan(1);
    });

    it('binary headers and null values round-trip as bytes', async () => {
      const topic = await freshTopic('bytes', 1);
      const p = await client.producer();
      await p.send(topic, [
        { key: Buffer.from([0, 1, 2]), value: null, headers: { bin: Buffer.from([0xff, 0x00]) } },
        { key: null, value: Buffer.from([0xc3, 0x01]) },
      ]);
      await p.disconnect();
      const out: ConsumedRecord[] = [];
      const c = client.batchConsumer({ groupId: `contract-${randomUUID()}`, topics: [topic] });
      await new Promise<void>((resolve, reject) => {
        c.run(async (batch) => {
          out.push(...batch.records);
          if (out.length >= 2) resolve();
        }).catch(reject);
      });
      await c.disconnect();
      expect(out[0]!.key).toEqual(Buffer.from([0, 1, 2]));
      expect(out[0]!.value).toBeNull();
      expect(out[0]!.headers.bin).toEqual(Buffer.from([0xff, 0x00]));
      expect(out[1]!.key).toBeNull();
      expect(out[1]!.value).toEqual(Buffer.from([0xc3, 0x01]));
      expect(Number(out[1]!.timestamp)).toBeGreaterThan(0);
      expect(out.map((r) => r.offset)).toEqual(['0', '1']);
    });

    it('nothing is committed unless committed: a new member of the group resumes exactly at the committed next offset', async () => {
      const topic = await freshTopic('commit', 1);
      const groupId = `contract-commit-${randomUUID()}`;
      await produce(topic, 10);

      // The first member processes everything but commits only up to offset 3 (next offset 4).
      const first = client.batchConsumer({ groupId, topics: [topic] });
      let handled = 0;
      await new Promise<void>((resolve, reject) => {
        first
          .run(async (batch) => {
            handled += batch.records.length;
            if (handled >= 10) {
              await first.commit([{ topic, partition: 0, offset: '4', metadata: 'after v3' }]);
              resolve();
            }
          })
          .catch(reject);
      });
      await first.disconnect();

      admin ??= await client.admin();
      expect(await admin.fetchCommittedOffsets(groupId, topic)).toEqual([
        { partition: 0, offset: '4', metadata: 'after v3' },
      ]);
      const again = await collect(client, { groupId, topics: [topic] }, 6);
      expect(again.map((m) => m.offset)).toEqual(['4', '5', '6', '7', '8', '9']);
      expect(again[0]!.value).toBe('v4');

      // A group that never committed has no offset.
      expect(await admin.fetchCommittedOffsets(`contract-none-${randomUUID()}`, topic)).toEqual([
        { partition: 0, offset: null, metadata: null },
      ]);
    });

    it('seek on assignment starts a partition at an offset kept elsewhere; a later seek re-reads', async () => {
      const topic = await freshTopic('seek', 2);
      const p = await client.producer();
      await p.send(topic, [
        ...Array.from({ length: 10 }, (_, i) => ({ value: `a${i}`, partition: 0 })),
        ...Array.from({ length: 10 }, (_, i) => ({ value: `b${i}`, partition: 1 })),
      ]);
      await p.disconnect();

      const assigned: number[][] = [];
      const c = client.batchConsumer({
        groupId: `contract-seek-${randomUUID()}`,
        topics: [topic],
        onAssigned: (a) => {
          const parts = a.find((x) => x.topic === topic)?.partitions ?? [];
          assigned.push([...parts].sort());
          // As the aggregator does with the offsets stored with its state.
          if (parts.includes(0)) c.seek(topic, 0, '7');
        },
      });
      const values: string[] = [];
      let reread = false;
      try {
        await new Promise<void>((resolve, reject) => {
          c.run(async (batch) => {
            values.push(...batch.records.map((r) => r.value!.toString()));
            if (!reread && values.includes('a9') && values.includes('b9')) {
              reread = true;
              c.seek(topic, 1, '8');
            } else if (reread && values.filter((v) => v === 'b9').length === 2) resolve();
          }).catch(reject);
        });
      } finally {
        await c.disconnect();
      }
      expect(assigned.at(-1)).toEqual([0, 1]);
      expect(values.filter((v) => v.startsWith('a'))).toEqual(['a7', 'a8', 'a9']);
      expect(values.filter((v) => v.startsWith('b'))).toEqual([
        ...Array.from({ length: 10 }, (_, i) => `b${i}`),
        'b8',
        'b9',
      ]);
    });

    it('a transaction makes its records and its group offsets visible together; an aborted one is invisible read-committed', async () => {
      const source = await freshTopic('tx-source', 1);
      const sink = await freshTopic('tx-sink', 1);
      const groupId = `contract-tx-${randomUUID()}`;
      await produce(source, 2);

      const tp = await client.transactionalProducer({ transactionalId: `contract-tx-${randomUUID()}` });
      try {
        // Committed: output plus the consumed position (next offset = last + 1) in one transaction.
        const committed = await tp.transaction();
        await committed.send(sink, [{ key: 'a', value: 'committed-out', headers: { h: 'x' } }]);
        await committed.sendOffsets(groupId, [
          { topic: source, partition: 0, offset: '2', metadata: '{"c":1}' },
        ]);
        await committed.commit();
        // Aborted: neither its record nor its offset may be visible.
        const aborted = await tp.transaction();
        await aborted.send(sink, [{ key: 'a', value: 'aborted-out' }]);
        await aborted.sendOffsets(groupId, [
          { topic: source, partition: 0, offset: '1', metadata: 'aborted' },
        ]);
        await aborted.abort();
        // A later committed record proves the reader got past the aborted one.
        const last = await tp.transaction();
        await last.send(sink, [{ key: 'a', value: 'committed-last' }]);
        await last.commit();
      } finally {
        await tp.disconnect();
      }

      admin ??= await client.admin();
      expect(await admin.fetchCommittedOffsets(groupId, source)).toEqual([
        { partition: 0, offset: '2', metadata: '{"c":1}' },
      ]);
      const rc = await collect(client, { topics: [sink] }, 2);
      expect(rc.map((m) => m.value)).toEqual(['committed-out', 'committed-last']);
      expect(rc[0]!.headers).toEqual({ h: 'x' });
      // Control: a read-uncommitted reader does see the aborted record, so the check above is meaningful.
      const ru = await collect(client, { topics: [sink], readCommitted: false }, 3);
      expect(ru.map((m) => m.value)).toContain('aborted-out');
    });

    it('a new transactional producer with the same id fences the old one, whose open transaction never becomes visible', async () => {
      const sink = await freshTopic('tx-fence', 1);
      const transactionalId = `contract-fence-${randomUUID()}`;
      const old = await client.transactionalProducer({ transactionalId });
      const open = await old.transaction();
      await open.send(sink, [{ value: 'from-fenced' }]);
      const next = await client.transactionalProducer({ transactionalId });
      try {
        await expect(open.commit()).rejects.toThrow();
        const tx = await next.transaction();
        await tx.send(sink, [{ value: 'from-new' }]);
        await tx.commit();
      } finally {
        await old.disconnect().catch(() => {});
        await next.disconnect();
      }
      const got = await collect(client, { topics: [sink] }, 1);
      expect(got.map((m) => m.value)).toEqual(['from-new']);
    });

    it('admin: ensureTopics is idempotent with explicit partitions; topic offsets are low/high per partition', async () => {
      admin ??= await client.admin();
      const name = `contract.admin.${randomUUID().slice(0, 8)}`;
      topics.push(name);
      const spec = {
        name,
        key: 'test',
        partitions: 3,
        replicationFactor: 1,
        config: { 'retention.ms': '-1' },
        doc: 'port contract test',
      };
      expect(await ensureTopics(admin, [spec])).toEqual({ created: [name], existing: [], fixed: [] });
      expect(await ensureTopics(admin, [spec])).toEqual({ created: [], existing: [name], fixed: [] });
      // Settings that lose what replay needs are an error naming them, or set right with `fix`.
      await admin.alterTopicConfigs({ [name]: { 'retention.ms': String(7 * 24 * 3600 * 1000) } });
      expect((await admin.describeTopicConfigs([name]))[name]?.['retention.ms']).toBe('604800000');
      const refused = await ensureTopics(admin, [spec]).catch((e: unknown) => e);
      expect(refused).toBeInstanceOf(TopicSettingsError);
      expect((refused as TopicSettingsError).message).toContain(
        `${name} has retention.ms=604800000, needs -1`,
      );
      expect((refused as TopicSettingsError).message).toContain('rods topics ensure --fix');
      const fixed = await ensureTopics(admin, [spec], { fix: true });
      expect(fixed.fixed).toEqual([
        { topic: name, setting: 'retention.ms', actual: '604800000', expected: '-1' },
      ]);
      expect((await admin.describeTopicConfigs([name]))[name]?.['retention.ms']).toBe('-1');
      expect(await admin.listTopics()).toContain(name);
      expect(await admin.fetchTopicOffsets(name)).toEqual(
        [0, 1, 2].map((partition) => ({ partition, low: '0', high: '0' })),
      );
      const p = await client.producer();
      await p.send(name, [
        { value: 'x', partition: 1 },
        { value: 'y', partition: 1 },
        { value: 'z', partition: 2 },
      ]);
      await p.disconnect();
      expect((await admin.fetchTopicOffsets(name)).map((o) => o.high)).toEqual(['0', '2', '1']);

      const cluster = await admin.describeCluster();
      expect(cluster.clusterId).toMatch(/\S/);
      expect(cluster.brokers.length).toBeGreaterThan(0);

      await admin.deleteTopics([name, `contract.never-created.${randomUUID()}`]);
      expect(await admin.listTopics()).not.toContain(name);
    });

    it('a probe with no retries against a port where no broker listens fails instead of waiting', async () => {
      // What `npm run stack:status` does before the broker is up: it must get an answer, not hang.
      const probe = open({
        clientId: 'rods-contract-probe',
        brokers: ['127.0.0.1:1'],
        retries: 0,
        quiet: true,
      });
      await expect(probe.admin().then((a) => a.describeCluster())).rejects.toThrow();
    });
  });
}
