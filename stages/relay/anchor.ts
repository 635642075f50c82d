// Audit anchors on Kafka: `rods audit anchor` and the relay's periodic anchor record an anchor
// (platform/store/events/audit.ts) and publish it as an AuditAnchored record on rods.audit-anchors.v1, a copy
// outside the database that `rods audit verify --kafka` compares the table's anchor with.
import { randomUUID } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import type pg from 'pg';
import { decode, encode } from '../../platform/codec/registry.js';
import {
  ensureTopics,
  type KafkaClient,
  openKafka,
  readToEnd,
  withAdmin,
} from '../../platform/kafka/client.js';
import { AUDIT_ANCHORS_TOPIC, topology } from '../../platform/kafka/topology.js';
import { backoffMs } from '../../platform/store/db.js';
import { type Anchor, type RecordAnchorOptions, recordAnchor } from '../../platform/store/events/audit.js';
import type { AuditAnchored } from '../../schemas/types.generated.js';

export interface PublishedAnchor extends Anchor {
  recorded: boolean;
  /** Where the copy went; absent when nothing new was recorded (onlyIfChanged). */
  offset?: string;
}

/** Records an anchor and publishes it; the anchor stays recorded if publishing fails. */
export async function anchorAndPublish(
  pool: pg.Pool,
  opts: RecordAnchorOptions & { kafka?: KafkaClient } = {},
): Promise<PublishedAnchor> {
  const a = await recordAnchor(pool, opts);
  if (!a.recorded) return a;
  const kafka = opts.kafka ?? openKafka({ clientId: 'rods-audit-anchor' });
  await withAdmin((admin) =>
    ensureTopics(
      admin,
      topology().filter((t) => t.name === AUDIT_ANCHORS_TOPIC),
    ),
  );
  const payload: AuditAnchored = {
    eventId: randomUUID(),
    storeId: a.storeId,
    anchorId: a.anchorId,
    globalPosition: a.globalPosition,
    streamPrefix: a.streamPrefix,
    streamCount: a.streamCount,
    algorithm: a.algorithm,
    digest: a.digest,
    occurredAt: Date.parse(a.anchoredAt),
  };
  const producer = await kafka.producer({ idempotent: true });
  try {
    const sent = await producer.send(AUDIT_ANCHORS_TOPIC, [
      { key: a.streamPrefix ?? '*', value: encode('AuditAnchored', payload) },
    ]);
    return { ...a, offset: sent[0]?.baseOffset };
  } finally {
    await producer.disconnect();
  }
}

/** Every anchor on the topic (in publishing order), read up to its current end. */
export async function readPublishedAnchors(
  opts: { kafka?: KafkaClient; timeoutMs?: number } = {},
): Promise<AuditAnchored[]> {
  const kafka = opts.kafka ?? openKafka({ clientId: 'rods-audit-verify' });
  const out: AuditAnchored[] = [];
  await readToEnd(
    AUDIT_ANCHORS_TOPIC,
    (records) => {
      for (const r of records) {
        if (!r.value) continue;
        try {
          const d = decode(r.value);
          if (d.name === 'AuditAnchored') out.push(d.payload);
        } catch {
          // Not an anchor this reader knows: not evidence either way.
        }
      }
    },
    { client: kafka, fromBeginning: true, readCommitted: true, timeoutMs: opts.timeoutMs ?? 60_000 },
  );
  return out.sort((a, b) => a.anchorId - b.anchorId);
}

/**
 * The relay's periodic anchor: every intervalMs, an anchor of every stream when the store moved
 * since the last one. Failures are logged and retried at the next tick; ends with the signal.
 */
export async function runPeriodicAnchor(
  pool: pg.Pool,
  opts: { intervalMs: number; signal: AbortSignal; log?: (msg: string) => void },
): Promise<void> {
  const log = opts.log ?? ((m) => console.error(m));
  let failures = 0;
  while (!opts.signal.aborted) {
    const wait = failures ? Math.min(opts.intervalMs, backoffMs(failures, 60_000)) : opts.intervalMs;
    await sleep(wait, undefined, { signal: opts.signal }).catch(() => {});
    if (opts.signal.aborted) return;
    try {
      // After a failure, anchor anew even if nothing moved: the last one may not be on Kafka.
      const a = await anchorAndPublish(pool, { onlyIfChanged: failures === 0 });
      if (a.recorded)
        log(
          `audit anchor ${a.anchorId}: ${a.streamCount} streams, position ${a.globalPosition} (${a.algorithm})`,
        );
      failures = 0;
    } catch (e) {
      failures++;
      log(`audit anchor failed (${(e as Error).message}); retrying`);
    }
  }
}

/** The periodic anchor's interval: RODS_AUDIT_ANCHOR_MINUTES (default 10; 0 turns it off). */
export function anchorIntervalMs(env: NodeJS.ProcessEnv = process.env): number {
  const raw = env.RODS_AUDIT_ANCHOR_MINUTES;
  const m = raw === undefined || raw === '' ? 10 : Number(raw);
  if (!Number.isFinite(m) || m < 0)
    throw new Error(`RODS_AUDIT_ANCHOR_MINUTES: expected minutes >= 0, got ${raw}`);
  return Math.round(m * 60_000);
}
