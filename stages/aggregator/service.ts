// The stream aggregator process: a member of a Kafka consumer group on rods.rewards.v1 (through
// the project's Kafka port, platform/kafka/port.ts) that applies each batch with processBatch
// (stages/aggregator/batch.ts), closes steps, and exposes Prometheus metrics. Several processes in one
// group share the partitions.
//
// A lost PostgreSQL connection is waited out: the failed batch transaction rolled back, so the
// same batch is applied again with backoff (it starts from the stored offset, as any
// redelivery does); /readyz answers 503 meanwhile. Any other failure of a batch is narrowed down
// to its record, which is dead-lettered after a few attempts (stages/aggregator/isolate.ts).
import { randomUUID } from 'node:crypto';
import { hostname } from 'node:os';
import { setTimeout as sleep } from 'node:timers/promises';
import type pg from 'pg';
import pino from 'pino';
import client from 'prom-client';
import { defaultRegistry, type SchemaRegistry } from '../../platform/codec/registry.js';
import {
  type BatchConsumer,
  type BatchContext,
  openKafka,
  type PartitionBatch,
  type RecordProducer,
  type TopicPartitions,
  TopicSettingsError,
  topicSettingProblems,
  withAdmin,
} from '../../platform/kafka/client.js';
import { DLQ_TOPIC, deadLetters } from '../../platform/kafka/dlq.js';
import { REWARDS_TOPIC, topology } from '../../platform/kafka/topology.js';
import { storedNextOffsets } from '../../platform/store/aggregator/offsets.js';
import { loadParked, parkedQueues } from '../../platform/store/aggregator/park.js';
import {
  ALONE_CRASHES_TO_DEAD_LETTER,
  beginRange,
  type CrashedRange,
  type RangeMark,
} from '../../platform/store/aggregator/suspects.js';
import {
  backoffMs,
  databaseStatus,
  isConnectionError,
  ping,
  retryOnConnectionLoss,
} from '../../platform/store/db.js';
import { type MetricsServer, processRegistry, serveMetrics } from '../../platform/util/metrics.js';
import { installNodeSha256 } from '../../platform/util/node-sha256.js';
import {
  BATCH_PHASES,
  type BatchDeps,
  type BatchResult,
  type DeadLetterNote,
  processBatch,
  type RewardRecord,
} from './batch.js';
import { CampaignCache } from './campaign-cache.js';
import {
  applyIsolating,
  applyOneByOne,
  DEFAULT_MAX_RECORD_ATTEMPTS,
  DeadLetterSendError,
  isTransient,
  ResultSum,
} from './isolate.js';
import { closeReadySteps } from './steps.js';
import { DEFAULT_TASK_CACHE_SIZE, TaskStateCache } from './task-cache.js';

/** Parked records applied per drain transaction. */
const DRAIN_CHUNK = 1000;
/** Records applied (and marked) at a time: the largest range a crash can leave. */
const MARKED_RANGE = 20_000;
/** A crashed range larger than this is applied in marked sub-ranges of this size first. */
const SUB_RANGE = 64;

export interface AggregatorOptions {
  groupId?: string;
  topic?: string;
  metricsPort?: number;
  /** Groups per task whose event ids are remembered for duplicate detection. */
  dedupeWindow?: number;
  /** Tasks kept in memory between batches (stages/aggregator/task-cache.ts); 0 reads every task in full. */
  taskCache?: number;
  logLevel?: string;
  /** Partitions whose batches are applied at the same time (each in its own transaction). */
  concurrency?: number;
  /** Consumer group session timeout: how long a dead member keeps its partitions. */
  sessionTimeoutMs?: number;
  /** Failed attempts at one record before it is dead-lettered (stages/aggregator/isolate.ts); default 3. */
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
  /** Partitions of the topic this member holds (drains run on these only). */
  private held = new Set<number>();
  private draining?: Promise<void>;
  private drainAgain = false;
  private readonly registry: SchemaRegistry = defaultRegistry();
  private readonly campaigns: CampaignCache;
  private readonly tasks?: TaskStateCache;
  private readonly log: pino.Logger;
  /**
   * This process among the group's members (platform/store/aggregator/suspects.ts tells a retry
   * from a crash), and the closedBy of the StepAggregated events it appends.
   */
  readonly instance = `${hostname()}-${process.pid}-${randomUUID().slice(0, 8)}`;
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
    help: 'StepStatsRecorded events (one per campaign, step and batch) appended to the event store by applied batches',
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
  private readonly parkedRecords = new client.Counter({
    name: 'rods_aggregator_parked_records_total',
    help: "records set aside behind their campaign's failing records (platform/store/aggregator/park.ts)",
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
    await this.checkTopics();
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
      // Parked records left by another member, or by a drain that met an outage.
      this.kickDrain();
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
   * The rewards and dead-letter topics must keep their records for replay: a wrong retention or
   * cleanup policy stops the start with the setting and the fix. Kafka away at start is not an
   * error here (the consumer waits for it; `rods doctor` checks again).
   */
  private async checkTopics(): Promise<void> {
    const specs = topology();
    const rewards = specs.find((t) => t.name === REWARDS_TOPIC)!;
    const dlq = specs.find((t) => t.name === DLQ_TOPIC)!;
    try {
      const problems = await withAdmin(
        (a) => topicSettingProblems(a, [{ ...rewards, name: this.topic }, dlq]),
        { clientId: `rods-aggregator-${process.pid}`, retries: 1, quiet: true },
      );
      if (problems.length > 0) throw new TopicSettingsError(problems);
    } catch (e) {
      if (e instanceof TopicSettingsError) throw e;
      this.log.warn({ err: (e as Error).message }, 'topic settings not checked (Kafka not answering yet)');
    }
  }

  /**
   * Resumes every assigned partition at the offset stored with the state (Kafka's committed
   * offsets are only a hint; records below the stored offset are skipped anyway).
   */
  private async resumeAtStoredOffsets(assignment: TopicPartitions[]): Promise<void> {
    const parts = assignment.find((a) => a.topic === this.topic)?.partitions ?? [];
    this.log.info({ partitions: parts }, 'partitions assigned');
    this.held = new Set(parts);
    this.kickDrain();
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

  private batchDeps(topic: string, partition: number): BatchDeps {
    return {
      pool: this.pool,
      registry: this.registry,
      campaigns: this.campaigns,
      groupId: this.groupId,
      deadLetter: (notes: DeadLetterNote[]) => this.sendDeadLetters(topic, partition, notes),
      dedupeWindow: this.opts.dedupeWindow,
      tasks: this.tasks,
    };
  }

  private async handleBatch(batch: PartitionBatch, ctx: BatchContext): Promise<void> {
    // A fetch can hold tens of thousands of records: they are applied (and marked) a bounded
    // range at a time, so the range a crash leaves behind is never larger than MARKED_RANGE.
    for (let i = 0; i < batch.records.length; i += MARKED_RANGE) {
      if (!ctx.isRunning() || ctx.isStale()) return;
      await this.handleRange({ ...batch, records: batch.records.slice(i, i + MARKED_RANGE) }, ctx);
    }
  }

  private async handleRange(batch: PartitionBatch, ctx: BatchContext): Promise<void> {
    if (!ctx.isRunning() || ctx.isStale()) return;
    const end = this.batchSeconds.startTimer();
    const deps = this.batchDeps(batch.topic, batch.partition);
    const isolate = {
      maxAttempts: this.opts.maxRecordAttempts ?? DEFAULT_MAX_RECORD_ATTEMPTS,
      log: this.log,
      heartbeat: () => ctx.heartbeat(),
      abandoned: () => !ctx.isRunning() || ctx.isStale(),
    };
    // The range is marked before any record is decoded: if one kills this process, the next
    // process to take the partition finds out (platform/store/aggregator/suspects.ts).
    const mark = (from: string, to: string, how: RangeMark = {}) =>
      retryOnConnectionLoss(
        this.pool,
        () =>
          beginRange(
            this.pool,
            this.groupId,
            batch.topic,
            batch.partition,
            Number(from),
            Number(to),
            this.instance,
            how,
          ),
        { shouldStop: () => this.stopping || !ctx.isRunning() || ctx.isStale() },
      );
    /** Marks the records' range and applies them as one batch (a failing one is isolated). */
    const applyMarked = async (
      records: readonly RewardRecord[],
      how: RangeMark = {},
    ): Promise<BatchResult | null> => {
      const crashed = await mark(records[0]!.offset, records[records.length - 1]!.offset, how);
      if (crashed) return applyCrashed(crashed, records);
      for (let attempt = 0; ; attempt++) {
        try {
          const r = await processBatch(deps, batch.topic, batch.partition, records);
          databaseStatus(this.pool).restored();
          return r;
        } catch (e) {
          if (!isTransient(e)) {
            // A record of the batch fails its transaction: find it, and never stall the partition on it.
            this.log.warn(
              { partition: batch.partition, records: records.length, err: (e as Error).message },
              'batch failed; searching it for the records at fault',
            );
            return applyIsolating(
              deps,
              {
                ...isolate,
                beforeRecord: async (offset) => void (await mark(offset, offset, { alone: true })),
              },
              batch.topic,
              batch.partition,
              records,
              e,
            );
          }
          // Rolled back: nothing of the batch is stored; apply it again once the database (or the
          // dead-letter topic) is back.
          if (isConnectionError(e)) databaseStatus(this.pool).lost(e);
          else this.log.warn({ partition: batch.partition, err: (e as Error).message }, 'batch retried');
          await sleep(backoffMs(attempt));
          // Keeps the membership alive; throws (to rejoin) when the group rebalances.
          await ctx.heartbeat();
          if (!ctx.isRunning() || ctx.isStale()) return null;
        }
      }
    };
    /**
     * A range another process died in: a large one is applied in sub-ranges of SUB_RANGE, each
     * marked (a crash narrows it); a small one one record at a time, each marked alone. The
     * records of the batch after the range are applied as usual (one marked batch).
     */
    const applyCrashed = async (crashed: CrashedRange, records: readonly RewardRecord[]) => {
      const upTo = records.filter((x) => Number(x.offset) <= crashed.to);
      const after = records.slice(upTo.length);
      const head = await applyCrashedRange(crashed, upTo);
      if (!head || after.length === 0) return head;
      // This process's own marks now stand at the partition: the rest is not taken as crashed.
      const tail = await applyMarked(after);
      if (!tail) return null;
      const sum = new ResultSum();
      sum.add(head);
      sum.add(tail);
      return sum.result();
    };
    const applyCrashedRange = async (
      crashed: CrashedRange,
      records: readonly RewardRecord[],
    ): Promise<BatchResult | null> => {
      const inRange = records.filter((x) => Number(x.offset) >= crashed.from);
      if (!crashed.alone && crashed.to - crashed.from + 1 > SUB_RANGE && inRange.length > 1) {
        this.log.warn(
          { partition: batch.partition, from: crashed.from, to: crashed.to, owner: crashed.owner },
          `a process died folding this range: applying it ${SUB_RANGE} records at a time`,
        );
        const sum = new ResultSum();
        for (let i = 0; i < records.length; i += SUB_RANGE) {
          const r = await applyMarked(records.slice(i, i + SUB_RANGE), { part: true });
          if (!r) return null;
          sum.add(r);
        }
        return sum.result();
      }
      // Processes that died with this one record marked alone (an outside kill counts too).
      const deaths = crashed.alone ? crashed.crashes + 1 : 0;
      const alone = deaths >= ALONE_CRASHES_TO_DEAD_LETTER ? String(crashed.from) : undefined;
      this.log.warn(
        {
          partition: batch.partition,
          from: crashed.from,
          to: crashed.to,
          owner: crashed.owner,
          since: crashed.startedAt,
          deaths,
        },
        alone
          ? 'the record here killed processes on its own: dead-lettering it (reader-crashed)'
          : 'a process died folding this range: applying it one record at a time',
      );
      return applyOneByOne(
        deps,
        {
          ...isolate,
          beforeRecord: async (offset) => {
            await mark(offset, offset, {
              alone: true,
              crashes: crashed.alone && offset === String(crashed.from) ? deaths : 0,
            });
          },
          ...(alone
            ? {
                crashedAlone: {
                  offset: alone,
                  reason: `${deaths} processes reading offset ${alone} of ${batch.topic}/${batch.partition} alone died (the last marked it at ${crashed.startedAt}: ${crashed.owner}), after a process folding its batch had died too`,
                },
              }
            : {}),
        },
        batch.topic,
        batch.partition,
        records,
      );
    };
    const r = await applyMarked(batch.records);
    if (!r) return;
    end();
    this.events.inc({ outcome: 'applied' }, r.applied);
    this.events.inc({ outcome: 'duplicate' }, r.duplicates);
    this.events.inc({ outcome: 'rejected' }, r.rejected);
    this.events.inc({ outcome: 'skipped' }, r.skipped);
    for (const p of BATCH_PHASES) this.phaseSeconds.inc({ phase: p }, r.phases[p]);
    this.statsEvents.inc(r.events);
    if (r.parked > 0) {
      this.parkedRecords.inc(r.parked);
      this.kickDrain();
    }
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
        const closed = await closeReadySteps(
          this.pool,
          [...new Set(r.steps.map((x) => x.campaignId))],
          Date.now,
          this.instance,
        );
        this.stepsClosed.inc(closed.length);
        for (const s of closed) this.log.info(s, 'step aggregated');
      } catch (e) {
        // The batch is stored; the sweeper closes its steps once the database is back.
        if (!isConnectionError(e)) throw e;
        databaseStatus(this.pool).lost(e);
      }
    }
  }

  /** Starts a drain of the parked records of held partitions, or asks the running one to look again. */
  private kickDrain(): void {
    if (this.stopping) return;
    if (this.draining) {
      this.drainAgain = true;
      return;
    }
    this.draining = this.drain()
      .catch((e: Error) => {
        if (isConnectionError(e)) databaseStatus(this.pool).lost(e);
        else this.log.warn({ err: e.message }, 'drain of parked records failed; tried again');
      })
      .finally(() => {
        this.draining = undefined;
        if (this.drainAgain) {
          this.drainAgain = false;
          this.kickDrain();
        }
      });
  }

  /** Applies parked records, a campaign's oldest first, until none is left on held partitions. */
  private async drain(): Promise<void> {
    for (;;) {
      if (this.stopping) return;
      const queues = await parkedQueues(this.pool, this.groupId, this.topic, [...this.held]);
      if (queues.length === 0) return;
      for (const q of queues) {
        if (this.stopping || !this.held.has(q.partition)) continue;
        await this.drainQueue(q.partition, q.campaignId);
      }
    }
  }

  private async drainQueue(partition: number, campaignId: string): Promise<void> {
    const records = await loadParked(this.pool, this.groupId, this.topic, partition, campaignId, DRAIN_CHUNK);
    if (records.length === 0) return;
    const deps = this.batchDeps(this.topic, partition);
    const ctx = {
      maxAttempts: this.opts.maxRecordAttempts ?? DEFAULT_MAX_RECORD_ATTEMPTS,
      log: this.log,
      heartbeat: async () => {},
      abandoned: () => this.stopping || !this.held.has(partition),
    };
    let r: BatchResult | null;
    try {
      r = await processBatch(deps, this.topic, partition, records, { drain: true });
    } catch (e) {
      if (isTransient(e)) throw e;
      r = await applyIsolating(deps, ctx, this.topic, partition, records, e, { drain: true });
    }
    if (!r) return;
    this.events.inc({ outcome: 'applied' }, r.applied);
    this.events.inc({ outcome: 'duplicate' }, r.duplicates);
    this.events.inc({ outcome: 'rejected' }, r.rejected);
    this.statsEvents.inc(r.events);
    this.log.info(
      { partition, campaignId, records: records.length, applied: r.applied, rejected: r.rejected },
      'parked records drained',
    );
    if (r.steps.length > 0) {
      const closed = await closeReadySteps(this.pool, [campaignId], Date.now, this.instance);
      this.stepsClosed.inc(closed.length);
      for (const s of closed) this.log.info(s, 'step aggregated');
    }
  }

  private async sweep(): Promise<void> {
    try {
      const closed = await closeReadySteps(this.pool, undefined, Date.now, this.instance);
      this.stepsClosed.inc(closed.length);
      for (const s of closed) this.log.info(s, 'step aggregated');
      databaseStatus(this.pool).restored();
    } catch (e) {
      if (!isConnectionError(e)) throw e;
      databaseStatus(this.pool).lost(e);
    }
  }

  private async sendDeadLetters(topic: string, partition: number, notes: DeadLetterNote[]): Promise<void> {
    try {
      await deadLetters(
        this.producer!,
        notes.map((n) => ({ ...n, topic, partition })),
        { registry: this.registry },
      );
    } catch (e) {
      throw new DeadLetterSendError(e);
    }
    for (const n of notes) {
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
    await this.draining;
    await this.consumer?.disconnect().catch(() => {});
    await this.producer?.disconnect().catch(() => {});
    await this.server?.close();
  }
}
