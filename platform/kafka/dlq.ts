// The dead-letter path: a record that a consumer cannot decode (or does not expect) goes to
// rods.dlq.v1 as a DeadLettered record with the reason, its source topic, partition and offset
// and the original key and value bytes, keyed by the source topic. Nothing is dropped silently
// and nothing undecodable reaches the statistics. A dead letter always fits under the broker's
// record limit: originals too big for it keep their first bytes, with size and SHA-256 in the
// reason (a dead letter that cannot be sent would stall its consumer for good).
import { createHash } from 'node:crypto';
import { eventIds } from '../../domain/ids.js';
import type { DeadLettered, EventName } from '../../schemas/types.generated.js';
import { DecodeError } from '../codec/errors.js';
import { type DecodedEvent, defaultRegistry, type SchemaRegistry } from '../codec/registry.js';
import type { ConsumedRecord, RecordSender, SentBatch } from './port.js';
import { maxRecordBytes } from './topology.js';

export const DLQ_TOPIC = 'rods.dlq.v1';

/** A producer or a transaction: inside a consume-transform-produce transaction the dead letter commits with the offsets. */
export type Sender = RecordSender;

export interface DeadLetterInput {
  /** Human-readable reason. */
  reason: string;
  /** Machine-readable reason: a DecodeError code, or another short code such as unexpected-event. */
  code: string;
  /** Source topic, partition and offset of the record. */
  topic: string;
  partition: number;
  offset: string | number;
  /** Original key and value bytes. */
  key: Buffer | null;
  value: Buffer | null;
}

export interface DeadLetterOptions {
  /** The registry that encodes the DeadLettered record (the project's schemas by default). */
  registry?: SchemaRegistry;
  /** Target topic; rods.dlq.v1 by default. */
  dlqTopic?: string;
  /** Clock for occurredAt (milliseconds since the epoch). */
  now?: () => number;
  /** The largest record the DLQ takes; default maxRecordBytes() (platform/kafka/topology.ts). */
  maxRecordBytes?: number;
}

/** Bytes of an original key or value a dead letter keeps when the whole would not fit. */
export const DLQ_KEPT_BYTES = 64 * 1024;
/** Longest reason kept, in characters (an error text can quote a whole payload). */
const REASON_CHARS = 4000;
/** Room for the record's other fields, headers and batch overhead. */
const OVERHEAD_BYTES = 4096;

/** Key, value and reason cut so that the DeadLettered record fits in `limit` bytes. */
export function fitDeadLetter(
  input: Pick<DeadLetterInput, 'key' | 'value' | 'reason'>,
  limit: number,
): { key: Buffer | null; value: Buffer | null; reason: string } {
  let reason =
    input.reason.length > REASON_CHARS
      ? `${input.reason.slice(0, REASON_CHARS)}... (reason cut)`
      : input.reason;
  const size = (b: Buffer | null) => b?.length ?? 0;
  if (size(input.key) + size(input.value) + Buffer.byteLength(reason) * 2 + OVERHEAD_BYTES <= limit) {
    return { key: input.key, value: input.value, reason };
  }
  // Reason (up to 4 bytes a character in UTF-8) and both prefixes fit together.
  const keep = Math.max(
    0,
    Math.min(DLQ_KEPT_BYTES, Math.floor((limit - OVERHEAD_BYTES - REASON_CHARS * 4 - 512) / 2)),
  );
  const cut = (what: string, b: Buffer | null): Buffer | null => {
    if (b === null || b.length <= keep) return b;
    const sha = createHash('sha256').update(b).digest('hex');
    reason += `; ${what}: first ${keep} of ${b.length} bytes kept, sha256 ${sha}`;
    return b.subarray(0, keep);
  };
  const key = cut('key', input.key);
  const value = cut('value', input.value);
  return { key, value, reason };
}

function offsetNumber(offset: string | number): number {
  const n = typeof offset === 'number' ? offset : Number(offset);
  if (!Number.isSafeInteger(n) || n < 0) throw new RangeError(`invalid Kafka offset ${String(offset)}`);
  return n;
}

/** Publishes a DeadLettered record to the DLQ (acks from all in-sync replicas) and returns it. */
export async function deadLetter(
  sender: Sender,
  input: DeadLetterInput,
  opts: DeadLetterOptions = {},
): Promise<{ record: DeadLettered; metadata: SentBatch[] }> {
  const { records, metadata } = await deadLetters(sender, [input], opts);
  return { record: records[0]!, metadata };
}

/**
 * Publishes several DeadLettered records in one send (a burst of failing records costs one
 * round trip, not one each); each fits under the record limit on its own. Returns them in order.
 */
export async function deadLetters(
  sender: Sender,
  inputs: readonly DeadLetterInput[],
  opts: DeadLetterOptions = {},
): Promise<{ records: DeadLettered[]; metadata: SentBatch[] }> {
  const limit = opts.maxRecordBytes ?? maxRecordBytes();
  const registry = opts.registry ?? defaultRegistry();
  const now = opts.now ?? Date.now;
  const records = inputs.map((input): DeadLettered => {
    const fit = fitDeadLetter(input, limit);
    return {
      // Derived from the source position: a dead letter re-sent after a crash carries the same id.
      eventId: eventIds.deadLettered(input.topic, input.partition, input.offset, input.code),
      reasonCode: input.code,
      reason: fit.reason,
      sourceTopic: input.topic,
      partition: input.partition,
      offset: offsetNumber(input.offset),
      key: fit.key,
      value: fit.value,
      occurredAt: now(),
    };
  });
  if (records.length === 0) return { records, metadata: [] };
  const messages = records.map((record, i) => ({
    key: inputs[i]!.topic,
    value: registry.encode('DeadLettered', record),
  }));
  // Acks from all in-sync replicas (the port's default). A send stays under the record limit in
  // total (a broker refuses a produce request above its message.max.bytes).
  const metadata: SentBatch[] = [];
  let chunk: typeof messages = [];
  let bytes = 0;
  for (const m of messages) {
    const size = m.value.length + Buffer.byteLength(m.key) + 64;
    if (chunk.length > 0 && bytes + size > limit) {
      metadata.push(...(await sender.send(opts.dlqTopic ?? DLQ_TOPIC, chunk)));
      chunk = [];
      bytes = 0;
    }
    chunk.push(m);
    bytes += size;
  }
  metadata.push(...(await sender.send(opts.dlqTopic ?? DLQ_TOPIC, chunk)));
  return { records, metadata };
}

export interface SourceRecord {
  topic: string;
  partition: number;
  message: Pick<ConsumedRecord, 'key' | 'value' | 'offset'>;
}

export interface DecodeOrDeadLetterOptions extends DeadLetterOptions {
  /** Event names this consumer accepts; any other decodable event is dead-lettered as unexpected-event. */
  accept?: readonly EventName[];
}

/** Decodes a consumed record, or says why it cannot be read (the dead-letter code and reason). */
export function decodeOrReason(
  source: SourceRecord,
  opts: Pick<DecodeOrDeadLetterOptions, 'accept' | 'registry'> = {},
): { decoded: DecodedEvent } | { code: string; reason: string } {
  const { topic, message } = source;
  try {
    if (message.value === null) throw new DecodeError('too-short', 'record has no value (a tombstone)');
    const decoded = (opts.registry ?? defaultRegistry()).decode(message.value) as DecodedEvent;
    if (!opts.accept || opts.accept.includes(decoded.name)) return { decoded };
    return {
      code: 'unexpected-event',
      reason: `${decoded.name} is not an event this consumer reads from ${topic} (accepts ${opts.accept.join(', ')})`,
    };
  } catch (e) {
    if (!(e instanceof DecodeError)) throw e;
    return { code: e.code, reason: e.message };
  }
}

/**
 * Decodes a consumed record, or routes it to the DLQ and returns null. Only decoding problems
 * are dead-lettered; a failure to publish to the DLQ is thrown so that the consumer does not
 * commit past a record that went nowhere.
 */
export async function decodeOrDeadLetter(
  sender: Sender,
  source: SourceRecord,
  opts: DecodeOrDeadLetterOptions = {},
): Promise<DecodedEvent | null> {
  const r = decodeOrReason(source, opts);
  if ('decoded' in r) return r.decoded;
  const { topic, partition, message } = source;
  await deadLetter(
    sender,
    {
      reason: r.reason,
      code: r.code,
      topic,
      partition,
      offset: message.offset,
      key: message.key,
      value: message.value,
    },
    opts,
  );
  return null;
}
