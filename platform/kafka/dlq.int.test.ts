import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { DeadLettered } from '../../schemas/types.generated.js';
import { SAMPLE_EVENTS } from '../../test/support/codec/samples.js';
import { decode, encode } from '../codec/registry.js';
import { ensureTopics, openKafka, readUntil, withAdmin } from './client.js';
import { DLQ_TOPIC, decodeOrDeadLetter } from './dlq.js';
import { topology } from './topology.js';

const k = openKafka({ clientId: 'rods-dlq-test' });
const source = `dlqtest.source.${randomUUID()}`;

beforeAll(async () => {
  await withAdmin(async (a) => {
    await ensureTopics(a, [
      ...topology().filter((t) => t.name === DLQ_TOPIC),
      { name: source, key: 'test', partitions: 1, replicationFactor: 1, config: {}, doc: 'DLQ test source' },
    ]);
  });
});

afterAll(async () => {
  await withAdmin((a) => a.deleteTopics([source]));
});

describe('dead-letter path', () => {
  it('routes undecodable and unexpected records to rods.dlq.v1 with reason, position and original bytes', async () => {
    const malformed = Buffer.from('{"taskId":"t","rewards":[1,0]}');
    const unknownFingerprint = Buffer.concat([
      Buffer.from([0xc3, 0x01]),
      Buffer.from('ffeeddccbbaa9988', 'hex'),
      Buffer.from([0x02, 0x61]),
    ]);
    const good = encode('RolloutGroupScored', SAMPLE_EVENTS.RolloutGroupScored);
    const unexpected = encode('TaskRetired', SAMPLE_EVENTS.TaskRetired);
    const sent: { key: Buffer; value: Buffer | null }[] = [
      { key: Buffer.from('task-good'), value: good },
      { key: Buffer.from('task-malformed'), value: malformed },
      { key: Buffer.from('task-unknown'), value: unknownFingerprint },
      { key: Buffer.from('task-unexpected'), value: unexpected },
      { key: Buffer.from('task-tombstone'), value: null },
    ];

    const p = await k.producer();
    try {
      await p.send(source, sent);

      // Consume the source the way a consumer of rods.rewards.v1 would.
      const results: (string | null)[] = [];
      await readUntil(
        source,
        async (message, partition) => {
          const decoded = await decodeOrDeadLetter(
            p,
            { topic: source, partition, message },
            { accept: ['RolloutGroupScored', 'StepClosed'] },
          );
          results.push(decoded ? decoded.name : null);
          return results.length === sent.length;
        },
        { client: k },
      );
      expect(results).toEqual(['RolloutGroupScored', null, null, null, null]);
    } finally {
      await p.disconnect();
    }

    // Read the DLQ back and pick this test's records by their key (the unique source topic).
    const letters: { name: string; record: DeadLettered }[] = [];
    await readUntil(
      DLQ_TOPIC,
      (m) => {
        if (m.key?.toString() === source) {
          const d = decode(m.value!);
          letters.push({ name: d.name, record: d.payload as DeadLettered });
        }
        return letters.length === 4;
      },
      { client: k },
    );

    expect(letters.map((l) => l.name)).toEqual(Array(4).fill('DeadLettered'));
    const byOffset = new Map(letters.map((l) => [l.record.offset, l.record]));
    expect([...byOffset.keys()].sort()).toEqual([1, 2, 3, 4]);
    const expected: [offset: number, code: string, reason: RegExp][] = [
      [1, 'bad-magic', /not an Avro single-object record: starts with 0x7b22/],
      [2, 'unknown-fingerprint', /no published schema has fingerprint ffeeddccbbaa9988/],
      [3, 'unexpected-event', /TaskRetired is not an event this consumer reads/],
      [4, 'too-short', /no value \(a tombstone\)/],
    ];
    for (const [offset, code, reason] of expected) {
      const rec = byOffset.get(offset)!;
      expect(rec.reasonCode).toBe(code);
      expect(rec.reason).toMatch(reason);
      expect(rec.sourceTopic).toBe(source);
      expect(rec.partition).toBe(0);
      expect(rec.key).toEqual(sent[offset]!.key);
      expect(rec.value).toEqual(sent[offset]!.value);
      expect(rec.eventId).toMatch(/^[0-9a-f-]{36}$/);
    }
  });
});
