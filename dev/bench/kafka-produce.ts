// Smallest real benchmark, kept as the template for the others: idempotent, acks=all
// production of N keyed messages against acks=1 production of the same messages.
import { randomUUID } from 'node:crypto';
import { ensureTopics, openKafka, type RecordProducer, withAdmin } from '../../platform/kafka/client.js';
import type { BenchResult } from './result.js';

/** Sends n keyed 200-byte messages in batches of 1,000, then disconnects; messages per second. */
export async function sendRate(p: RecordProducer, topic: string, n: number): Promise<number> {
  const value = Buffer.alloc(200, 1);
  const t0 = performance.now();
  for (let i = 0; i < n; i += 1000) {
    const messages = Array.from({ length: Math.min(1000, n - i) }, (_, j) => ({
      key: `task-${(i + j) % 997}`,
      value,
    }));
    await p.send(topic, messages);
  }
  const s = (performance.now() - t0) / 1000;
  await p.disconnect();
  return n / s;
}

export default async function kafkaProduce(opts: Record<string, string | boolean>): Promise<BenchResult> {
  const n = Number(opts.messages ?? 100_000);
  const topic = `bench.produce.${randomUUID().slice(0, 8)}`;
  await withAdmin((a) =>
    ensureTopics(a, [
      { name: topic, key: 'k', partitions: 6, replicationFactor: 1, config: {}, doc: 'bench' },
    ]),
  );
  const k = openKafka({ clientId: 'rods-bench' });
  const run = async (idempotent: boolean) =>
    sendRate(
      await k.producer(idempotent ? { idempotent: true } : { idempotent: false, acks: 'leader' }),
      topic,
      n,
    );
  try {
    const baseline = await run(false);
    const idem = await run(true);
    return {
      messages: n,
      idempotent_msgs_per_s: Math.round(idem),
      baseline_msgs_per_s: Math.round(baseline),
      ratio: idem / baseline,
    };
  } finally {
    await withAdmin((a) => a.deleteTopics([topic]));
  }
}
