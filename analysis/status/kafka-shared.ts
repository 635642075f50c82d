// What status reads from Kafka, shared by every status call of a process (the gateway answers
// one per open dashboard tab every few seconds): one Kafka client and one admin client, kept
// connected and reconnected after a failure, and one dead-letter tail, a single consumer that
// follows rods.dlq.v1 for the process's life and keeps the newest dead letters per partition in
// memory. Before, every call opened a client and an admin (leaked when the connect outlived the
// call's deadline, in a broker brownout) and joined a fresh consumer group to scan the topic.
import { randomUUID } from 'node:crypto';
import { hostname } from 'node:os';
import { defaultRegistry, type SchemaRegistry } from '../../platform/codec/registry.js';
import {
  type BatchConsumer,
  type KafkaClient,
  openKafka,
  type TopicAdmin,
} from '../../platform/kafka/client.js';
import { DLQ_TOPIC } from '../../platform/kafka/dlq.js';
import type { DeadLetters } from './report.js';

export interface DeadLetterNote {
  occurredAt: number;
  reasonCode: string;
  /** The campaign the original record names; null when it names none. */
  campaignId: string | null;
}

/** The newest dead letters of each partition, as the tail read them. */
class DeadLetterTail {
  private consumer: BatchConsumer | undefined;
  private readonly byPartition = new Map<number, DeadLetterNote[]>();
  private started: Promise<void> | undefined;
  scanned = 0;
  truncated = false;

  constructor(
    private readonly kafka: KafkaClient,
    private readonly window: number,
    private readonly campaignOf: (value: Buffer | null) => string | null,
    private readonly registry: SchemaRegistry,
    private readonly topic = DLQ_TOPIC,
  ) {}

  /**
   * Starts following the topic from the newest `window` records of each partition (once) and
   * resolves when its position passed the ends it saw at the start, so the first answer is
   * complete.
   */
  start(admin: TopicAdmin, timeoutMs: number): Promise<void> {
    this.started ??= (async () => {
      this.byPartition.clear();
      this.scanned = 0;
      this.truncated = false;
      const offsets = await admin.fetchTopicOffsets(this.topic);
      const from = new Map<number, string>();
      const pending = new Map<number, number>();
      for (const p of offsets) {
        const low = Number(p.low);
        const high = Number(p.high);
        const start = Math.max(low, high - this.window);
        if (start > low) this.truncated = true;
        from.set(p.partition, String(start));
        if (high > start) pending.set(p.partition, high);
      }
      let caughtUp: () => void = () => {};
      const done = new Promise<void>((resolve) => {
        caughtUp = resolve;
      });
      if (pending.size === 0) caughtUp();
      const c = this.kafka.batchConsumer({
        // One group per StatusKafka, for its life (not one per status call); its own, so two in
        // one process do not share the topic's partitions between them.
        groupId: `rods-status-${hostname()}-${process.pid}-${randomUUID().slice(0, 8)}`,
        topics: [this.topic],
        fromBeginning: true,
        maxWaitMs: 1000,
        // The position passes the end seen at the start even when a partition ends in
        // transaction markers (no record at high - 1).
        onPosition: (_topic, partition, next) => {
          const end = pending.get(partition);
          if (end !== undefined && Number(next) >= end) pending.delete(partition);
          if (pending.size === 0) caughtUp();
        },
        onAssigned: (assignment) => {
          for (const a of assignment)
            for (const p of a.partitions) {
              const at = from.get(p);
              if (at !== undefined) c.seek(this.topic, p, at);
            }
        },
      });
      this.consumer = c;
      void c
        .run(async (batch) => {
          const list = this.byPartition.get(batch.partition) ?? [];
          for (const rec of batch.records) {
            this.scanned++;
            if (!rec.value) continue;
            try {
              const d = this.registry.decode(rec.value).payload as {
                reasonCode: string;
                occurredAt: number;
                value: Buffer | null;
              };
              list.push({
                occurredAt: Number(d.occurredAt),
                reasonCode: d.reasonCode,
                campaignId: this.campaignOf(d.value),
              });
            } catch {
              // not a dead letter of ours
            }
          }
          // Bounded: the newest `window` of each partition.
          if (list.length > this.window) list.splice(0, list.length - this.window);
          this.byPartition.set(batch.partition, list);
        })
        .catch(() => {
          // The client reconnects by itself; a dead consumer is started afresh on the next call.
          this.started = undefined;
          this.consumer = undefined;
          caughtUp();
        });
      await done;
    })();
    const started = this.started;
    started.catch(() => {
      if (this.started === started) this.started = undefined;
    });
    // A call that gives up waiting leaves the tail reading: the next call waits for it again.
    let timer: NodeJS.Timeout | undefined;
    return Promise.race([
      started,
      new Promise<void>((_, reject) => {
        timer = setTimeout(
          () => reject(new Error(`reading ${this.topic}: not caught up within ${timeoutMs} ms`)),
          timeoutMs,
        );
      }),
    ]).finally(() => clearTimeout(timer));
  }

  since(campaignId: string, sinceMs: number | null): DeadLetters {
    const out: DeadLetters = {
      since: sinceMs === null ? null : new Date(sinceMs).toISOString(),
      total: 0,
      byReason: {},
      unattributed: {},
      scanned: this.scanned,
      truncated: this.truncated,
    };
    for (const list of this.byPartition.values())
      for (const n of list) {
        if (sinceMs !== null && n.occurredAt < sinceMs) continue;
        if (n.campaignId === campaignId) {
          out.total++;
          out.byReason[n.reasonCode] = (out.byReason[n.reasonCode] ?? 0) + 1;
        } else if (n.campaignId === null)
          out.unattributed[n.reasonCode] = (out.unattributed[n.reasonCode] ?? 0) + 1;
      }
    return out;
  }

  async stop(): Promise<void> {
    await this.consumer?.disconnect().catch(() => {});
    this.consumer = undefined;
    this.started = undefined;
  }
}

/** One Kafka client, admin and dead-letter tail for a process's status calls. */
export class StatusKafka {
  readonly kafka: KafkaClient;
  private admin: Promise<TopicAdmin> | undefined;
  private tail: DeadLetterTail | undefined;

  constructor(
    private readonly campaignOf: (value: Buffer | null, registry: SchemaRegistry) => string | null,
    kafka?: KafkaClient,
    private readonly registry: SchemaRegistry = defaultRegistry(),
  ) {
    this.kafka = kafka ?? openKafka({ clientId: `rods-status-${process.pid}`, retries: 1, quiet: true });
  }

  /** The connected admin (connected once; a failed connect is tried again on the next call). */
  connectedAdmin(): Promise<TopicAdmin> {
    if (!this.admin) {
      const p = this.kafka.admin();
      this.admin = p;
      p.catch(() => {
        if (this.admin === p) this.admin = undefined;
      });
    }
    return this.admin;
  }

  /** An admin call failed on the connection: the next call connects a new one. */
  async reset(): Promise<void> {
    const a = this.admin;
    this.admin = undefined;
    await a?.then((x) => x.disconnect()).catch(() => {});
  }

  async deadLetters(
    campaignId: string,
    sinceMs: number | null,
    opts: { timeoutMs?: number; window?: number } = {},
  ): Promise<DeadLetters> {
    this.tail ??= new DeadLetterTail(
      this.kafka,
      opts.window ?? 2000,
      (v) => this.campaignOf(v, this.registry),
      this.registry,
    );
    await this.tail.start(await this.connectedAdmin(), opts.timeoutMs ?? 10_000);
    return this.tail.since(campaignId, sinceMs);
  }

  async close(): Promise<void> {
    await this.tail?.stop();
    await this.reset();
  }
}
