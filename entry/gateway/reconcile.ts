// The batch reconciler: publishes rollout batches the gateway accepted but never published nor
// handed to a running ingestion workflow (the gateway died between the commit and the end of its
// direct publish, entry/gateway/publish.ts, or its send failed while Temporal was down too). Without it
// such a batch waits for the trainer to send it again; one that never
// does leaves its step's StepClosed waiting for groups that never arrive, and steps close in
// order, so the campaign stalls for good.
//
// Every tick (at start, then every interval) it takes the batches accepted more than the grace
// period ago and still unpublished, and starts each one's ingestion workflow under its
// deterministic id, as the gateway would have. That is idempotent: a running execution is
// left alone (already started), a completed one has published the batch (so it is not listed);
// one that failed or was terminated is started anew. Records a dead gateway or an earlier
// attempt already sent go out again under the same event ids, and the aggregator counts each
// group once. Only batches of campaigns whose campaign workflow runs
// on this gateway's task queue are started: nothing else waits for them, and a gateway serving
// another queue has its own reconciler. A failed tick (PostgreSQL or Temporal away) is logged
// once and retried with backoff; it never ends the process.
import {
  type Client,
  WorkflowExecutionAlreadyStartedError,
  WorkflowIdReusePolicy,
  WorkflowNotFoundError,
} from '@temporalio/client';
import type pg from 'pg';
import { workflowIds } from '../../domain/ids.js';
import { REWARDS_TOPIC } from '../../platform/kafka/topology.js';
import {
  campaignsWithUnpublishedBatches,
  type StaleBatch,
  staleUnpublishedBatches,
} from '../../platform/store/steps/batches.js';
import type { IngestionInput } from '../../workflows/ingestion.js';
import { ingestionWorkflow } from '../../workflows/ingestion.js';

export const DEFAULT_RECONCILE_INTERVAL_MS = 10_000;
export const DEFAULT_RECONCILE_GRACE_MS = 30_000;

export interface ReconcileSettings {
  /** Pause between two ticks (default 10 s). */
  intervalMs?: number;
  /** A batch younger than this is left to the request that accepted it (default 30 s). */
  graceMs?: number;
  /** Workflows started at most per tick (default 500); the rest wait for the next tick. */
  maxPerTick?: number;
  /** Only these campaigns (tests); default every campaign. */
  campaigns?: readonly string[];
}

/** The pino methods the reconciler logs with (fastify's logger and pino both fit). */
export interface ReconcileLog {
  info(obj: object, msg: string): void;
  warn(obj: object, msg: string): void;
  debug(obj: object, msg: string): void;
}

export interface ReconcilerOptions extends ReconcileSettings {
  db: pg.Pool;
  temporal: Client;
  /** Task queue of the rods worker; the ingestion workflows start there. */
  taskQueue: string;
  /** Topic the ingestion workflows publish to (default rods.rewards.v1). */
  rewardsTopic?: string;
  log?: ReconcileLog;
  /** Deadline of each Temporal call (default 10 s). */
  callTimeoutMs?: number;
}

export interface TickResult {
  /** Ingestion workflows this tick started. */
  started: StaleBatch[];
  /** Batches whose ingestion workflow was already running. */
  running: number;
  /** Campaigns with stale batches left alone, with the reason. */
  skipped: { campaignId: string; reason: string }[];
}

const silent: ReconcileLog = { info() {}, warn() {}, debug() {} };

export class BatchReconciler {
  private readonly intervalMs: number;
  private readonly graceMs: number;
  private readonly maxPerTick: number;
  private readonly log: ReconcileLog;
  /** One controller per Temporal call in flight (a long-lived signal would collect a listener per call). */
  private readonly calls = new Set<AbortController>();
  private timer: NodeJS.Timeout | undefined;
  private current: Promise<unknown> | undefined;
  private stopped = false;
  /** Consecutive failed ticks (0 when the last one succeeded). */
  failures = 0;
  private failingSince = 0;
  /** Campaigns found not served by this gateway's queue, until when that answer holds. */
  private readonly notServed = new Map<string, { until: number; reason: string }>();

  constructor(private readonly opts: ReconcilerOptions) {
    this.intervalMs = opts.intervalMs ?? DEFAULT_RECONCILE_INTERVAL_MS;
    this.graceMs = opts.graceMs ?? DEFAULT_RECONCILE_GRACE_MS;
    this.maxPerTick = opts.maxPerTick ?? 500;
    this.log = opts.log ?? silent;
    if (!(this.intervalMs > 0))
      throw new RangeError(`reconcile interval must be > 0 ms, got ${this.intervalMs}`);
    if (!(this.graceMs >= 0)) throw new RangeError(`reconcile grace must be >= 0 ms, got ${this.graceMs}`);
  }

  /** Runs a first tick at once, then one every interval (longer after failures). */
  start(): void {
    if (this.stopped || this.timer || this.current) return;
    this.schedule(0);
  }

  /** Stops ticking; an in-flight tick's Temporal calls are cancelled and it is awaited. */
  async stop(): Promise<void> {
    this.stopped = true;
    clearTimeout(this.timer);
    this.timer = undefined;
    for (const call of this.calls) call.abort();
    await this.current?.catch(() => {});
  }

  /** Delay before the next tick: the interval, doubling per failed tick up to 6 intervals (or 60 s). */
  nextDelayMs(): number {
    if (this.failures === 0) return this.intervalMs;
    const cap = Math.max(this.intervalMs * 6, 60_000);
    const base = Math.min(cap, this.intervalMs * 2 ** Math.min(this.failures - 1, 10));
    return Math.round(base * (0.75 + Math.random() * 0.5));
  }

  private schedule(delayMs: number): void {
    if (this.stopped) return;
    this.timer = setTimeout(() => {
      this.timer = undefined;
      const run = this.safeTick();
      this.current = run;
      void run.finally(() => {
        this.current = undefined;
        this.schedule(this.nextDelayMs());
      });
    }, delayMs);
    this.timer.unref?.();
  }

  private async safeTick(): Promise<void> {
    try {
      const r = await this.tick();
      if (this.failures > 0)
        this.log.info(
          { failedTicks: this.failures, outageMs: Date.now() - this.failingSince },
          'batch reconciler: PostgreSQL and Temporal answer again',
        );
      this.failures = 0;
      if (r.started.length > 0 || r.skipped.length > 0)
        this.log.debug(
          { started: r.started.length, running: r.running, skipped: r.skipped.length },
          'batch reconciler tick',
        );
    } catch (e) {
      if (this.stopped) return;
      if (this.failures === 0) {
        this.failingSince = Date.now();
        this.log.warn(
          { err: (e as Error).message },
          'batch reconciler: tick failed (PostgreSQL or Temporal unreachable?); retrying with backoff',
        );
      } else
        this.log.debug(
          { err: (e as Error).message, failures: this.failures + 1 },
          'batch reconciler: tick failed again',
        );
      this.failures++;
    }
  }

  private async temporalCall<R>(fn: () => Promise<R>): Promise<R> {
    const { temporal } = this.opts;
    const call = new AbortController();
    this.calls.add(call);
    try {
      return await temporal.withAbortSignal(call.signal, () =>
        temporal.withDeadline(Date.now() + (this.opts.callTimeoutMs ?? 10_000), fn),
      );
    } finally {
      this.calls.delete(call);
    }
  }

  /** Why this gateway does not publish a campaign's batches, or null when it does. */
  private async notServedReason(campaignId: string): Promise<string | null> {
    const known = this.notServed.get(campaignId);
    if (known && known.until > Date.now()) return known.reason;
    let reason: string | null = null;
    try {
      const d = await this.temporalCall(() =>
        this.opts.temporal.workflow.getHandle(workflowIds.campaign(campaignId)).describe(),
      );
      if (d.status.name !== 'RUNNING') reason = `its campaign workflow is ${d.status.name.toLowerCase()}`;
      else if (d.taskQueue !== this.opts.taskQueue)
        reason = `its campaign workflow runs on task queue ${d.taskQueue}, not ${this.opts.taskQueue}`;
    } catch (e) {
      if (!(e instanceof WorkflowNotFoundError)) throw e;
      reason = 'it has no campaign workflow';
    }
    if (reason === null) this.notServed.delete(campaignId);
    // Asked again later: a campaign whose workflow start failed may be created again.
    else
      this.notServed.set(campaignId, { until: Date.now() + Math.max(60_000, 10 * this.intervalMs), reason });
    return reason;
  }

  /** One pass; throws when PostgreSQL or Temporal fails (the caller retries). */
  async tick(): Promise<TickResult> {
    const { db, temporal, taskQueue } = this.opts;
    const out: TickResult = { started: [], running: 0, skipped: [] };
    const now = Date.now();
    for (const [id, v] of this.notServed) if (v.until <= now) this.notServed.delete(id);
    const only = this.opts.campaigns ? new Set(this.opts.campaigns) : undefined;
    const campaigns = (await campaignsWithUnpublishedBatches(db, this.graceMs)).filter(
      (c) => !only || only.has(c.campaignId),
    );
    let budget = this.maxPerTick;
    for (const { campaignId } of campaigns) {
      if (this.stopped || budget <= 0) break;
      const reason = await this.notServedReason(campaignId);
      if (reason !== null) {
        out.skipped.push({ campaignId, reason });
        continue;
      }
      for (const b of await staleUnpublishedBatches(db, campaignId, this.graceMs, budget)) {
        if (this.stopped) break;
        budget--;
        const input: IngestionInput = { claimId: b.claimId, topic: this.opts.rewardsTopic ?? REWARDS_TOPIC };
        try {
          await this.temporalCall(() =>
            temporal.workflow.start(ingestionWorkflow, {
              taskQueue,
              workflowId: b.workflowId,
              // A failed or terminated execution never published the batch: start it anew.
              workflowIdReusePolicy: WorkflowIdReusePolicy.ALLOW_DUPLICATE_FAILED_ONLY,
              args: [input],
            }),
          );
          out.started.push(b);
          this.log.info(
            { campaignId, step: b.step, batchId: b.batchId, workflowId: b.workflowId },
            'batch reconciler: started the ingestion of an accepted batch left unpublished',
          );
        } catch (e) {
          if (!(e instanceof WorkflowExecutionAlreadyStartedError)) throw e;
          out.running++;
        }
      }
    }
    return out;
  }
}
