// Sending records so that a resolved send means every record was written.
//
// kafkajs 2.2.4 can resolve a send with some partitions never written: its retry loop keeps one
// response per broker across attempts (node_modules/kafkajs/src/producer/sendMessages.js:20) and
// re-sends only to brokers without one (:64-65). When broker B answers NOT_LEADER for a partition
// whose leadership moved to broker A, and A already answered for its own partitions, the retry
// finds A answered and sends nothing; the send resolves with A's partitions only, and B's records
// are lost (the 300-step soak lost 18 accepted groups this way during a leader rebalance after a
// Kafka restart; upstream: tulios/kafkajs#1798, open). So every record gets its partition here,
// by the partitioner kafkajs would use (the same key, the same partition), and the partitions the
// response does not name are sent again, alone.
import { type Message, type PartitionerArgs, Partitioners, type Producer } from 'kafkajs';
import { type OutgoingRecord, RecordTooLargeError, type SentBatch } from '../../port.js';

/** How many times the partitions a send left out are sent again before the send fails. */
export const MAX_RESENDS = 5;

/** The partition count of a topic (read once per client: the topology fixes it). */
export type PartitionCount = (topic: string) => Promise<number>;

export class PartialSendError extends Error {
  override name = 'PartialSendError';
}

function toMessage(r: OutgoingRecord): Message {
  return {
    key: r.key ?? null,
    value: r.value,
    ...(r.headers ? { headers: r.headers } : {}),
    ...(r.partition !== undefined ? { partition: r.partition } : {}),
  };
}

/** kafkajs' default partitioner (murmur2 of the key, as the Java client) over `count` partitions. */
export function partitionerFor(): (topic: string, count: number, message: Message) => number {
  const choose = Partitioners.DefaultPartitioner();
  return (topic, count, message) =>
    choose({
      topic,
      message,
      partitionMetadata: Array.from({ length: count }, (_, partitionId) => ({ partitionId, leader: 0 })),
    } as unknown as PartitionerArgs);
}

/**
 * Sends the records to `topic` and resolves once every partition they go to acknowledged them;
 * a partition left out of the acknowledgement is sent again (at most MAX_RESENDS times).
 */
export async function sendAll(
  sender: Pick<Producer, 'send'>,
  topic: string,
  records: OutgoingRecord[],
  acks: number,
  partitions: { count: PartitionCount; choose: ReturnType<typeof partitionerFor> },
  onResend?: (missing: number[]) => void,
): Promise<SentBatch[]> {
  if (records.length === 0) return [];
  const count = await partitions.count(topic);
  let pending = records.map((r) => {
    const m = toMessage(r);
    const partition = partitions.choose(topic, count, m);
    if (!Number.isInteger(partition) || partition < 0 || partition >= count)
      throw new RangeError(`${topic}: partition ${partition} is not one of its ${count} partitions`);
    return { ...m, partition };
  });
  const out: SentBatch[] = [];
  for (let resend = 0; ; resend++) {
    let meta: Awaited<ReturnType<Producer['send']>>;
    try {
      meta = await sender.send({ topic, acks, messages: pending });
    } catch (e) {
      if (tooLarge(e)) throw new RecordTooLargeError(`${topic}: ${(e as Error).message}`, { cause: e });
      throw e;
    }
    const written = new Set<number>();
    for (const m of meta) {
      written.add(m.partition);
      out.push({
        topic: m.topicName,
        partition: m.partition,
        ...(m.baseOffset !== undefined ? { baseOffset: m.baseOffset } : {}),
      });
    }
    pending = pending.filter((m) => !written.has(m.partition));
    if (pending.length === 0) return out;
    const missing = [...new Set(pending.map((m) => m.partition))].sort((a, b) => a - b);
    if (resend >= MAX_RESENDS)
      throw new PartialSendError(
        `${topic}: partitions ${missing.join(', ')} were not acknowledged after ${MAX_RESENDS} resends (${pending.length} records)`,
      );
    onResend?.(missing);
  }
}

/** A broker refusal for size, possibly wrapped by kafkajs' retrier. */
function tooLarge(e: unknown, depth = 0): boolean {
  if (!e || typeof e !== 'object' || depth > 4) return false;
  const { type, originalError, cause, errors } = e as Record<string, unknown>;
  if (type === 'MESSAGE_TOO_LARGE' || type === 'RECORD_LIST_TOO_LARGE') return true;
  if (Array.isArray(errors) && errors.some((x) => tooLarge(x, depth + 1))) return true;
  return tooLarge(originalError, depth + 1) || tooLarge(cause, depth + 1);
}
