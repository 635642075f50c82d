// What Kafka says about a campaign's progress, through the Kafka port: the relay's committed
// cursor (how far the event store is published), the aggregator's lag per partition (high
// watermarks vs. its offsets) and the dead letters written since a moment.
import { randomUUID } from 'node:crypto';
import type pg from 'pg';
import { DecodeError } from '../../platform/codec/errors.js';
import { defaultRegistry, type SchemaRegistry } from '../../platform/codec/registry.js';
import type { BatchConsumer, KafkaClient, TopicAdmin } from '../../platform/kafka/client.js';
import { DLQ_TOPIC } from '../../platform/kafka/dlq.js';
import { relayCheckpoint } from '../../platform/kafka/relay-checkpoint.js';
import { storedNextOffsets } from '../../platform/store/aggregator/offsets.js';
import { countAfter, countCampaignAfter, START } from '../../platform/store/events/event-store.js';
import type { AggregatorLag, DeadLetters, RelayLag } from './report.js';

/** The most unpublished events counted exactly (beyond that, `capped`). */
export const RELAY_LAG_CAP = 100_000;

export async function relayLag(
  admin: TopicAdmin,
  db: pg.Pool,
  campaignId: string,
  name: string,
): Promise<RelayLag> {
  const cursor = await relayCheckpoint(admin, name);
  const never = cursor.transactionId === START.transactionId && cursor.position === START.position;
  const all = await countAfter(db, cursor, RELAY_LAG_CAP + 1);
  const mine = await countCampaignAfter(db, campaignId, cursor, RELAY_LAG_CAP + 1);
  return {
    name,
    checkpoint: never ? null : cursor,
    unpublishedEvents: Math.min(all.n, RELAY_LAG_CAP),
    unpublishedCampaignEvents: Math.min(mine, RELAY_LAG_CAP),
    capped: all.n > RELAY_LAG_CAP,
    oldestUnpublishedAt: all.oldestAt?.toISOString() ?? null,
  };
}

export async function aggregatorLag(
  admin: TopicAdmin,
  db: pg.Pool,
  groupId: string,
  topic: string,
): Promise<AggregatorLag> {
  const [offsets, committed, stored] = await Promise.all([
    admin.fetchTopicOffsets(topic),
    admin.fetchCommittedOffsets(groupId, topic),
    storedNextOffsets(db, groupId, topic).then((xs) => new Map(xs.map((x) => [x.partition, x.nextOffset]))),
  ]);
  const hint = new Map(committed.map((c) => [c.partition, c.offset === null ? null : Number(c.offset)]));
  const partitions = offsets.map((p) => {
    const high = Number(p.high);
    const storedOffset = stored.get(p.partition) ?? null;
    const committedOffset = hint.get(p.partition) ?? null;
    const at = storedOffset ?? committedOffset ?? Number(p.low);
    return {
      partition: p.partition,
      highWatermark: high,
      storedOffset,
      committedOffset,
      lag: Math.max(0, high - at),
    };
  });
  return { groupId, topic, totalLag: partitions.reduce((a, p) => a + p.lag, 0), partitions };
}

/** The campaign a dead letter's original record belongs to, if its bytes say. */
export function campaignOf(value: Buffer | null, registry: SchemaRegistry): string | null {
  if (!value) return null;
  try {
    const d = registry.decode(value);
    const c = (d.payload as { campaignId?: unknown }).campaignId;
    return typeof c === 'string' ? c : null;
  } catch (e) {
    if (!(e instanceof DecodeError)) return null;
  }
  try {
    // The relay's dead letters carry the stored event as JSON.
    const j = JSON.parse(value.toString('utf8')) as {
      campaignId?: unknown;
      payload?: { campaignId?: unknown };
    };
    const c = j.campaignId ?? j.payload?.campaignId;
    return typeof c === 'string' ? c : null;
  } catch {
    return null;
  }
}

export interface DeadLetterScanOptions {
  /** Newest records read per partition; default 2000. */
  window?: number;
  /** Gives up after this long; default 10 s. */
  timeoutMs?: number;
  registry?: SchemaRegistry;
  topic?: string;
}

/**
 * Dead letters written since `sinceMs` (occurredAt), counted by reason: those whose original
 * record names `campaignId`, and those that name no campaign. Reads only the newest `window`
 * records of each partition of the dead-letter topic, with a throwaway consumer group.
 */
export async function deadLettersSince(
  kafka: KafkaClient,
  admin: TopicAdmin,
  campaignId: string,
  sinceMs: number | null,
  opts: DeadLetterScanOptions = {},
): Promise<DeadLetters> {
  const window = opts.window ?? 2000;
  const topic = opts.topic ?? DLQ_TOPIC;
  const registry = opts.registry ?? defaultRegistry();
  const out: DeadLetters = {
    since: sinceMs === null ? null : new Date(sinceMs).toISOString(),
    total: 0,
    byReason: {},
    unattributed: {},
    scanned: 0,
    truncated: false,
  };
  const offsets = await admin.fetchTopicOffsets(topic);
  const ranges = new Map<number, { from: number; high: number }>();
  for (const p of offsets) {
    const low = Number(p.low);
    const high = Number(p.high);
    const from = Math.max(low, high - window);
    if (from > low) out.truncated = true;
    if (high > from) ranges.set(p.partition, { from, high });
  }
  if (ranges.size === 0) return out;
  const pending = new Set(ranges.keys());
  // A partition may end in transaction markers (no record at high - 1): once assigned, a
  // consumer that gets nothing more for `idleMs` has read all there is.
  const idleMs = 1200;
  let lastActivity: number | null = null;
  let consumer: BatchConsumer | undefined;
  consumer = kafka.batchConsumer({
    groupId: `rods-status-${randomUUID()}`,
    topics: [topic],
    fromBeginning: true,
    maxWaitMs: 500,
    onAssigned: (assignment) => {
      lastActivity = Date.now();
      for (const a of assignment)
        for (const p of a.partitions) {
          const r = ranges.get(p);
          if (r) consumer?.seek(topic, p, String(r.from));
        }
    },
  });
  const timeoutMs = opts.timeoutMs ?? 10_000;
  try {
    await new Promise<void>((resolve, reject) => {
      const finish = (e?: Error) => {
        clearTimeout(timer);
        clearInterval(idle);
        if (e) reject(e);
        else resolve();
      };
      const timer = setTimeout(
        () =>
          finish(new Error(`reading ${topic}: ${pending.size} partition(s) not read within ${timeoutMs} ms`)),
        timeoutMs,
      );
      const idle = setInterval(() => {
        if (lastActivity !== null && Date.now() - lastActivity > idleMs) finish();
      }, 250);
      consumer
        .run(async (batch) => {
          lastActivity = Date.now();
          const r = ranges.get(batch.partition);
          if (!r) return;
          for (const rec of batch.records) {
            const offset = Number(rec.offset);
            if (offset < r.from || offset >= r.high) continue;
            out.scanned++;
            if (offset + 1 >= r.high) pending.delete(batch.partition);
            if (!rec.value) continue;
            let d: { reasonCode: string; occurredAt: number; value: Buffer | null };
            try {
              d = registry.decode(rec.value).payload as typeof d;
            } catch {
              continue;
            }
            if (sinceMs !== null && Number(d.occurredAt) < sinceMs) continue;
            const c = campaignOf(d.value, registry);
            if (c === campaignId) {
              out.total++;
              out.byReason[d.reasonCode] = (out.byReason[d.reasonCode] ?? 0) + 1;
            } else if (c === null) {
              out.unattributed[d.reasonCode] = (out.unattributed[d.reasonCode] ?? 0) + 1;
            }
          }
          if (pending.size === 0) finish();
        })
        .catch((e: Error) => finish(e));
    });
  } finally {
    await consumer.disconnect().catch(() => {});
  }
  return out;
}
