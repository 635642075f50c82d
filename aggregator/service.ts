// The stream aggregator process: a member of a Kafka consumer group on rods.rewards.v1 (through
// the project's Kafka port, kafka/port.ts) that applies each batch with processBatch
// (aggregator/batch.ts), closes steps, and exposes Prometheus metrics. Several processes in one
// group share the partitions.
//
// A lost PostgreSQL connection is waited out: the failed batch transaction rolled back, so the
// same batch is applied again with backoff (it starts from the stored offset, as any
// redelivery does); /readyz answers 503 meanwhile. Any other failure of a batch is narrowed down
// to its record, which is dead-lettered after a few attempts (aggregator/isolate.ts).
import { setTimeout as sleep } from 'node:timers/promises';
import type pg from 'pg';
import pino from 'pino';
import client from 'prom-client';
import { defaultRegistry, type SchemaRegistry } from '../codec/registry.js';
import {
  type BatchConsumer,
  type BatchContext,
  openKafka,
  type PartitionBatch,
  type RecordProducer,
  type TopicPartitions,
} from '../kafka/client.js';
import { deadLetter } from '../kafka/dlq.js';
import { REWARDS_TOPIC } from '../kafka/topology.js';
import { backoffMs, databaseStatus, isConnectionError, ping, retryOnConnectionLoss } from '../store/db.js';
import { type MetricsServer, processRegistry, serveMetrics } from '../util/metrics.js';
import { installNodeSha256 } from '../util/node-sha256.js';
import { BATCH_PHASES, type DeadLetterNote, processBatch } from './batch.js';
import { CampaignCache } from './campaign-cache.js';
import { applyOneByOne, DEFAULT_MAX_RECORD_ATTEMPTS, DeadLetterSendError, isTransient } from './isolate.js';
import { storedNextOffsets } from './state-store.js';
import { closeReadySteps } from './steps.js';
import { DEFAULT_TASK_CACHE_SIZE, TaskStateCache } from './task-cache.js';

export interface AggregatorOptions {
  groupId?: string;
  topic?: string;
  metricsPort?: number;
  /** Groups per task whose event ids are remembered for duplicate detection. */
  dedupeWindow?: number;
  /** Tasks kept in memory between batches (aggregator/task-cache.ts); 0 reads every task in full. */
  taskCache?: number;
  logLevel?: string;
  /** Partitions whose batches are applied at the same time (each in its own transaction). */
  concurrency?: number;
  /** Consumer group session timeout: how long a dead member keeps its partitions. */
  sessionTimeoutMs?: number;
  /** Failed attempts at one record before it is dead-lettered (aggregator/isolate.ts); default 3. */
  maxRecordAttempts?: number;
}

export class AggregatorService {
  readonly groupId: string;
  readonly topic: string;
  private consumer?: BatchConsumer;
  private producer?: RecordProducer;
  private server?: MetricsServer;
  private sweeper?: NodeJS.Timeout;
  /** The sweep in flight: stop() waits for it, so it never runs on a pool its owner has ended. */
  private sweeping?: Promise<void>;
  private stopping = false;
  private readonly registry: SchemaRegistry = defaultRegistry();
  private readonly campaigns: CampaignCache;
  private readonly tasks?: TaskStateCache;
  private readonly log: pino.Logger;
  readonly metrics = processRegistry();
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
  private readonly phaseSeconds = new client.Counter({
    name: 'rods_aggregator_batch_phase_seconds_total',
    help: 'time applied batches spent in each phase (decode, lock, load, fold, events, stats, progress, commit)',
    labelNames: ['phase'],
    registers: [this.metrics],
  });
  private readonly statsEvents = new client.Counter({
    name: 'rods_aggregator_stats_events_total',
    help: 'TaskBandChanged and TaskStatsUpdated events appended to the event store by applied batches',
    registers: [this.metrics],
  });
  private readonly lag = new client.Gauge({
    name: 'rods_aggregator_lag',
    help: 'records behind the partition high watermark after the last batch',
    labelNames: ['partition'],
    registers: [this.metrics],
  });
  private readonly lagSeconds = new client.Gauge({
    name: 'rods_aggregator_lag_seconds',
    help: 'age of the last applied record while the partition is behind its high watermark (0 when caught up)',
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
    installNodeSha256(); // the hot path derives an id per emitted event
    this.groupId = opts.groupId ?? 'rods-aggregator';
    this.topic = opts.topic ?? REWARDS_TOPIC;
    this.campaigns = new CampaignCache(pool);
    const cached = opts.taskCache ?? DEFAULT_TASK_CACHE_SIZE;
    if (cached > 0) this.tasks = new TaskStateCache(cached);
    this.log = pino({
      level: opts.logLevel ?? process.env.RODS_LOG_LEVEL ?? 'info',
      base: { component: 'aggregator' },
    });
  }

  async start(): Promise<void> {
    const kafka = openKafka({ clientId: `rods-aggregator-${process.pid}` });
    this.producer = await kafka.producer({ idempotent: true });
    const sessionTimeoutMs = this.opts.sessionTimeoutMs ?? 30_000;
    this.consumer = kafka.batchConsumer({
      groupId: this.groupId,
      topics: [this.topic],
      fromBeginning: true,
      // Batches of different partitions commit independently (each holds its own partition lock).
      concurrency: this.opts.concurrency ?? 3,
      maxBytesPerPartition: 8 * 1024 * 1024,
      maxWaitMs: 200,
      sessionTimeoutMs,
      rebalanceTimeoutMs: Math.max(10_000, sessionTimeoutMs * 2),
      heartbeatIntervalMs: Math.min(3000, Math.floor(sessionTimeoutMs / 3)),
      onAssigned: (assignment) => this.resumeAtStoredOffsets(assignment),
    });
    await this.consumer.run((batch, ctx) => this.handleBatch(batch, ctx));
    // Steps whose last group was applied by an instance that crashed before closing them.
    this.sweeper = setInterval(() => {
      if (this.sweeping) return;
      this.sweeping = this.sweep()
        .catch((e: Error) => this.log.warn({ err: e.message }, 'sweep failed'))
        .finally(() => {
          this.sweeping = undefined;
        });
    }, 5000);
    if (this.opts.metricsPort !== undefined) await this.serveMetrics(this.opts.metricsPort);
  }

  /**
   * Resumes every assigned partition at the offset stored with the state (Kafka's committed
   * offsets are only a hint; records below the stored offset are skipped anyway).
   */
  private async resumeAtStoredOffsets(assignment: TopicPartitions[]): Promise<void> {
    const parts = assignment.find((a) => a.topic === this.topic)?.partitions ?? [];
    this.log.info({ partitions: parts }, 'partitions assigned');
    if (parts.length === 0) return;
    // Runs in an event listener: a failure must not escape (the batches skip what is stored anyway).
    try {
      const stored = await retryOnConnectionLoss(
        this.pool,
        () => storedNextOffsets(this.pool, this.groupId, this.topic, parts),
        { shouldStop: () => this.stopping },
      );
      for (const r of stored) this.consumer?.seek(this.topic, r.partition, String(r.nextOffset));
    } catch (e) {
      this.log.warn({ err: (e as Error).message }, 'stored offsets not read; resuming at the committed hint');
    }
  }

  private async handleBatch(batch: PartitionBatch, ctx: BatchContext): Promise<void> {
    if (!ctx.isRunning() || ctx.isStale()) return;
    const end = this.batchSeconds.startTimer();
    const deps = {
      pool: this.pool,
      registry: this.registry,
      campaigns: this.campaigns,
      groupId: this.groupId,
      deadLetter: (notes: DeadLetterNote[]) => this.sendDeadLetters(batch.topic, batch.partition, notes),
      dedupeWindow: this.opts.dedupeWindow,
      tasks: this.tasks,
    };
    let r: Awaited<ReturnType<typeof processBatch>>;
    for (let attempt = 0; ; attempt++) {
      try {
        r = await processBatch(deps, batch.topic, batch.partition, batch.records);
        databaseStatus(this.pool).restored();
        break;
      } catch (e) {
        if (!isTransient(e)) {
          // A record of the batch fails its transaction: find it, and never stall the partition on it.
          this.log.warn(
            { partition: batch.partition, records: batch.records.length, err: (e as Error).message },
            'batch failed; applying its records one at a time',
          );
          const one = await applyOneByOne(
            deps,
            {
              maxAttempts: this.opts.maxRecordAttempts ?? DEFAULT_MAX_RECORD_ATTEMPTS,
              log: this.log,
              heartbeat: () => ctx.heartbeat(),
              abandoned: () => !ctx.isRunning() || ctx.isStale(),
            },
            batch.topic,
            batch.partition,
            batch.records,
          );
          if (!one) return;
          r = one;
          break;
        }
        // Rolled back: nothing of the batch is stored; apply it again once the database (or the
        // dead-letter topic) is back.
        if (isConnectionError(e)) databaseStatus(this.pool).lost(e);
        else this.log.warn({ partition: batch.partition, err: (e as Error).message }, 'batch retried');
        await sleep(backoffMs(attempt));
        // Keeps the membership alive; throws (to rejoin) when the group rebalances.
        await ctx.heartbeat();
        if (!ctx.isRunning() || ctx.isStale()) return;
      }
    }
    end();
    this.events.inc({ outcome: 'applied' }, r.applied);
    this.events.inc({ outcome: 'duplicate' }, r.duplicates);
    this.events.inc({ outcome: 'rejected' }, r.rejected);
    this.events.inc({ outcome: 'skipped' }, r.skipped);
    for (const p of BATCH_PHASES) this.phaseSeconds.inc({ phase: p }, r.phases[p]);
    this.statsEvents.inc(r.events);
    this.lag.set({ partition: String(batch.partition) }, batch.lag);
    const lastAt = Number(batch.records[batch.records.length - 1]?.timestamp);
    this.lagSeconds.set(
      { partition: String(batch.partition) },
      batch.lag > 0 && Number.isFinite(lastAt) ? Math.max(0, (Date.now() - lastAt) / 1000) : 0,
    );
    // A hint for the next join; the authority is aggregator_offsets.
    if (r.nextOffset) {
      await this.consumer
        ?.commit([{ topic: batch.topic, partition: batch.partition, offset: r.nextOffset }])
        .catch((e: Error) => this.log.warn({ err: e.message }, 'kafka offset hint not committed'));
    }
    await ctx.heartbeat();
    if (r.steps.length > 0) {
      try {
        const closed = await closeReadySteps(this.pool, [...new Set(r.steps.map((x) => x.campaignId))]);
        this.stepsClosed.inc(closed.length);
        for (const s of closed) this.log.info(s, 'step aggregated');
      } catch (e) {
        // The batch is stored; the sweeper closes its steps once the database is back.
        if (!isConnectionError(e)) throw e;
        databaseStatus(this.pool).lost(e);
      }
    }
  }

  private async sweep(): Promise<void> {
    try {
      const closed = await closeReadySteps(this.pool);
      this.stepsClosed.inc(closed.length);
      for (const s of closed) this.log.info(s, 'step aggregated');
      databaseStatus(this.pool).restored();
    } catch (e) {
      if (!isConnectionError(e)) throw e;
      databaseStatus(this.pool).lost(e);
    }
  }

  private async sendDeadLetters(topic: string, partition: number, notes: DeadLetterNote[]): Promise<void> {
    for (const n of notes) {
      try {
        await deadLetter(this.producer!, { ...n, topic, partition }, { registry: this.registry });
      } catch (e) {
        throw new DeadLetterSendError(e);
      }
      this.dlq.inc({ code: n.code });
      this.log.warn(
        { topic, partition, offset: n.offset, code: n.code, reason: n.reason },
        'record dead-lettered',
      );
    }
  }

  private async serveMetrics(port: number): Promise<void> {
    this.server = await serveMetrics({
      registry: this.metrics,
      port,
      // Ready only while the database answers (the batches wait for it otherwise).
      ready: async () =>
        (await ping(this.pool)) ? { ok: true } : { ok: false, detail: 'PostgreSQL unreachable' },
    });
    this.log.info({ port: this.server.port }, 'metrics on /metrics');
  }

  async stop(): Promise<void> {
    this.stopping = true;
    if (this.sweeper) clearInterval(this.sweeper);
    await this.sweeping;
    await this.consumer?.disconnect().catch(() => {});
    await this.producer?.disconnect().catch(() => {});
    await this.server?.close();
  }
}
