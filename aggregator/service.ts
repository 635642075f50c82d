// The stream aggregator process: a member of a Kafka consumer group on rods.rewards.v1 that
// applies each batch with applyBatch (aggregator/batch.ts), closes steps, and exposes
// Prometheus metrics. Several processes in one group share the partitions.
import http from 'node:http';
import type pg from 'pg';
import pino from 'pino';
import client from 'prom-client';
import { defaultRegistry, type SchemaRegistry } from '../codec/registry.js';
import {
  type Consumer,
  kafka,
  consumer as makeConsumer,
  producer as makeProducer,
  type Producer,
} from '../kafka/client.js';
import { deadLetter } from '../kafka/dlq.js';
import { REWARDS_TOPIC } from '../kafka/topology.js';
import { applyBatch, CampaignCache, type DeadLetterNote } from './batch.js';
import { closeReadySteps } from './steps.js';

export interface AggregatorOptions {
  groupId?: string;
  topic?: string;
  metricsPort?: number;
  /** Groups per task whose event ids are remembered for duplicate detection. */
  dedupeWindow?: number;
  logLevel?: string;
  /** Partitions whose batches are applied at the same time (each in its own transaction). */
  concurrency?: number;
  /** Consumer group session timeout: how long a dead member keeps its partitions. */
  sessionTimeoutMs?: number;
}

export class AggregatorService {
  readonly groupId: string;
  readonly topic: string;
  private consumer?: Consumer;
  private producer?: Producer;
  private server?: http.Server;
  private sweeper?: NodeJS.Timeout;
  private readonly registry: SchemaRegistry = defaultRegistry();
  private readonly campaigns: CampaignCache;
  private readonly log: pino.Logger;
  readonly metrics = new client.Registry();
  private readonly events = new client.Counter({
    name: 'rods_aggregator_events_total',
    help: 'reward records consumed, by outcome (applied, duplicate, rejected, skipped)',
    labelNames: ['outcome'],
    registers: [this.metrics],
  });
  private readonly dlq = new client.Counter({
    name: 'rods_aggregator_dlq_total',
    help: 'records sent to the dead-letter topic, by reason code',
    labelNames: ['code'],
    registers: [this.metrics],
  });
  private readonly batchSeconds = new client.Histogram({
    name: 'rods_aggregator_batch_seconds',
    help: 'time to apply one consumed batch (decode, transaction, commit)',
    buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5],
    registers: [this.metrics],
  });
  private readonly lag = new client.Gauge({
    name: 'rods_aggregator_lag',
    help: 'records behind the partition high watermark after the last batch',
    labelNames: ['partition'],
    registers: [this.metrics],
  });
  private readonly stepsClosed = new client.Counter({
    name: 'rods_aggregator_steps_closed_total',
    help: 'training steps closed (StepAggregated emitted)',
    registers: [this.metrics],
  });

  constructor(
    private readonly pool: pg.Pool,
    private readonly opts: AggregatorOptions = {},
  ) {
    this.groupId = opts.groupId ?? 'rods-aggregator';
    this.topic = opts.topic ?? REWARDS_TOPIC;
    this.campaigns = new CampaignCache(pool);
    this.log = pino({
      level: opts.logLevel ?? process.env.RODS_LOG_LEVEL ?? 'info',
      base: { component: 'aggregator' },
    });
    client.collectDefaultMetrics({ register: this.metrics });
  }

  async start(): Promise<void> {
    const k = kafka({ clientId: `rods-aggregator-${process.pid}` });
    this.producer = makeProducer(k, { idempotent: true, maxInFlightRequests: 1 });
    await this.producer.connect();
    this.consumer = makeConsumer(k, {
      groupId: this.groupId,
      maxBytesPerPartition: 8 * 1024 * 1024,
      maxWaitTimeInMs: 200,
      sessionTimeout: this.opts.sessionTimeoutMs ?? 30_000,
      rebalanceTimeout: Math.max(10_000, (this.opts.sessionTimeoutMs ?? 30_000) * 2),
      heartbeatInterval: Math.min(3000, Math.floor((this.opts.sessionTimeoutMs ?? 30_000) / 3)),
    });
    await this.consumer.connect();
    // Resume every assigned partition at the offset stored with the state (Kafka's committed
    // offsets are only a hint; records below the stored offset are skipped anyway).
    this.consumer.on(this.consumer.events.GROUP_JOIN, async (e) => {
      const parts = e.payload.memberAssignment[this.topic] ?? [];
      this.log.info({ partitions: parts }, 'partitions assigned');
      if (parts.length === 0) return;
      const { rows } = await this.pool.query<{ partition: number; next_offset: number }>(
        'select partition, next_offset from aggregator_offsets where group_id = $1 and topic = $2 and partition = any($3::int[])',
        [this.groupId, this.topic, parts],
      );
      for (const r of rows)
        this.consumer?.seek({ topic: this.topic, partition: r.partition, offset: String(r.next_offset) });
    });
    await this.consumer.subscribe({ topic: this.topic, fromBeginning: true });
    await this.consumer.run({
      autoCommit: false,
      eachBatchAutoResolve: false,
      // Batches of different partitions commit independently (each holds its own partition lock).
      partitionsConsumedConcurrently: this.opts.concurrency ?? 3,
      eachBatch: async ({ batch, heartbeat, resolveOffset, isRunning, isStale }) => {
        if (!isRunning() || isStale() || batch.messages.length === 0) return;
        const end = this.batchSeconds.startTimer();
        const r = await applyBatch(
          {
            pool: this.pool,
            registry: this.registry,
            campaigns: this.campaigns,
            groupId: this.groupId,
            deadLetter: (notes) => this.sendDeadLetters(batch.topic, batch.partition, notes),
            dedupeWindow: this.opts.dedupeWindow,
          },
          batch.topic,
          batch.partition,
          batch.messages,
        );
        end();
        this.events.inc({ outcome: 'applied' }, r.applied);
        this.events.inc({ outcome: 'duplicate' }, r.duplicates);
        this.events.inc({ outcome: 'rejected' }, r.rejected);
        this.events.inc({ outcome: 'skipped' }, r.skipped);
        const last = batch.messages[batch.messages.length - 1]!;
        resolveOffset(last.offset);
        this.lag.set({ partition: String(batch.partition) }, Number(batch.offsetLag()));
        // A hint for the next join; the authority is aggregator_offsets.
        if (r.nextOffset) {
          await this.consumer
            ?.commitOffsets([{ topic: batch.topic, partition: batch.partition, offset: r.nextOffset }])
            .catch((e: Error) => this.log.warn({ err: e.message }, 'kafka offset hint not committed'));
        }
        await heartbeat();
        if (r.steps.length > 0) {
          const closed = await closeReadySteps(this.pool, [...new Set(r.steps.map((x) => x.campaignId))]);
          this.stepsClosed.inc(closed.length);
          for (const s of closed) this.log.info(s, 'step aggregated');
        }
      },
    });
    // Steps whose last group was applied by an instance that crashed before closing them.
    this.sweeper = setInterval(() => {
      this.sweep().catch((e: Error) => this.log.warn({ err: e.message }, 'sweep failed'));
    }, 5000);
    if (this.opts.metricsPort !== undefined) await this.serveMetrics(this.opts.metricsPort);
  }

  private async sweep(): Promise<void> {
    const closed = await closeReadySteps(this.pool);
    this.stepsClosed.inc(closed.length);
  }

  private async sendDeadLetters(topic: string, partition: number, notes: DeadLetterNote[]): Promise<void> {
    for (const n of notes) {
      await deadLetter(this.producer!, { ...n, topic, partition }, { registry: this.registry });
      this.dlq.inc({ code: n.code });
      this.log.warn(
        { topic, partition, offset: n.offset, code: n.code, reason: n.reason },
        'record dead-lettered',
      );
    }
  }

  private serveMetrics(port: number): Promise<void> {
    this.server = http.createServer(async (req, res) => {
      if (req.url === '/metrics') {
        res.setHeader('content-type', this.metrics.contentType);
        res.end(await this.metrics.metrics());
      } else if (req.url === '/healthz') {
        res.end('ok');
      } else {
        res.statusCode = 404;
        res.end('not found: try /metrics or /healthz');
      }
    });
    return new Promise((resolve, reject) => {
      this.server!.once('error', reject);
      this.server!.listen(port, '127.0.0.1', () => {
        this.log.info({ port }, 'metrics on /metrics');
        resolve();
      });
    });
  }

  async stop(): Promise<void> {
    if (this.sweeper) clearInterval(this.sweeper);
    await this.consumer?.disconnect().catch(() => {});
    await this.producer?.disconnect().catch(() => {});
    await new Promise<void>((r) => (this.server ? this.server.close(() => r()) : r()));
  }
}
