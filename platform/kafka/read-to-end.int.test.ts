// readToEnd: a topic read from the beginning up to its end when the read starts. Records sent
// while it reads are not handed over, a missing topic reads as nothing.
import { randomUUID } from 'node:crypto';
import { afterAll, describe, expect, it } from 'vitest';
import { ensureTopics, openKafka, readToEnd, withAdmin } from './client.js';
import type { RecordProducer } from './port.js';

const k = openKafka({ clientId: 'rods-read-to-end-test' });
const topic = `readtoend.${randomUUID().slice(0, 8)}`;
let producer: RecordProducer | undefined;

afterAll(async () => {
  await producer?.disconnect();
  await withAdmin((a) => a.deleteTopics([topic]));
});

describe('readToEnd', () => {
  it('hands every record up to the end at the start, in partition order, and none sent meanwhile', async () => {
    await withAdmin((a) =>
      ensureTopics(a, [
        { name: topic, key: 'test', partitions: 2, replicationFactor: 1, config: {}, doc: 'test' },
      ]),
    );
    producer = await k.producer();
    const send = (p: number, values: string[]) =>
      producer!.send(
        topic,
        values.map((v) => ({ key: Buffer.from(v), value: Buffer.from(v), partition: p })),
      );
    await send(0, ['a0', 'a1', 'a2']);
    await send(1, ['b0', 'b1']);

    const seen: Record<number, string[]> = { 0: [], 1: [] };
    let sentDuring = false;
    await readToEnd(
      topic,
      async (records, partition) => {
        if (!sentDuring) {
          sentDuring = true;
          await send(0, ['late0']);
          await send(1, ['late1']);
        }
        for (const r of records) seen[partition]!.push(r.value!.toString());
      },
      { client: k, timeoutMs: 60_000 },
    );
    expect(sentDuring).toBe(true);
    expect(seen).toEqual({ 0: ['a0', 'a1', 'a2'], 1: ['b0', 'b1'] });
  }, 90_000);

  it('ends a partition whose last entries are transaction markers and aborted records', async () => {
    // A transactional producer (the relay's) leaves a commit marker after its records, and an
    // aborted transaction its records and a marker that no read-committed reader is handed: the
    // high watermark lies past the last record handed over.
    const txTopic = `${topic}.tx`;
    await withAdmin((a) =>
      ensureTopics(a, [
        { name: txTopic, key: 'test', partitions: 1, replicationFactor: 1, config: {}, doc: 'test' },
      ]),
    );
    try {
      producer ??= await k.producer();
      await producer.send(txTopic, [{ key: Buffer.from('p'), value: Buffer.from('plain'), partition: 0 }]);
      const tp = await k.transactionalProducer({ transactionalId: `read-to-end-${randomUUID()}` });
      try {
        const committed = await tp.transaction();
        await committed.send(txTopic, [{ key: 'c', value: 'committed', partition: 0 }]);
        await committed.commit();
        const aborted = await tp.transaction();
        await aborted.send(txTopic, [{ key: 'a', value: 'aborted', partition: 0 }]);
        await aborted.abort();
      } finally {
        await tp.disconnect();
      }
      const seen: string[] = [];
      await readToEnd(txTopic, (records) => void seen.push(...records.map((r) => r.value!.toString())), {
        client: k,
        timeoutMs: 30_000,
      });
      expect(seen).toEqual(['plain', 'committed']);
    } finally {
      await withAdmin((a) => a.deleteTopics([txTopic]));
    }
  }, 90_000);

  it('reads a topic that does not exist as nothing', async () => {
    let calls = 0;
    await readToEnd(`readtoend.missing.${randomUUID().slice(0, 8)}`, () => {
      calls++;
    });
    expect(calls).toBe(0);
  });
});
