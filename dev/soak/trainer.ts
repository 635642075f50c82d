// The soak's trainer: the simulated GRPO trainer's rollouts, sent the way real trainers send
// them when things break. A step goes out as several batches; some are sent twice; most clients
// retry 5xx, 429 and network errors with backoff (honouring Retry-After) until answered, and
// some never retry after a 5xx (that batch's fate is then unknown to the trainer). The closing
// batch always comes from a retrying client, after the others are answered. Every send and its
// outcome goes into the trainer's log, from which the soak computes its offline reference.
// Checkpoints are reported as rods_client's reporter does: after the step's report, in the order
// saved, retried through 503 checkpoint-ahead and outages, and never holding the next steps back.
// A refused step is one whose only batch (closing it) the gateway refuses (a reward out of range).

import { xorshift32 } from '../../platform/util/xorshift.js';
import {
  type CheckpointAnswer,
  GatewayError,
  SimulatedTrainer,
  type TaskRecord,
} from '../simulator/trainer.js';

export type BatchOutcome = 'accepted' | 'duplicate' | 'refused' | 'unknown';

export interface BatchLogEntry {
  step: number;
  batchId: string;
  close: boolean;
  client: 'retrying' | 'one-shot';
  groups: { taskId: string; rewards: number[] }[];
  outcome: BatchOutcome;
  attempts: number;
  status: number | null;
  error?: string;
}

export interface ChaosTrainerOptions {
  gatewayUrl: string;
  token: string;
  campaignId: string;
  seed: number;
  batchesPerStep?: number;
  /** Share of batches sent a second time. */
  duplicateRate?: number;
  /** Share of non-closing batches sent by a client that never retries after a 5xx. */
  oneShotRate?: number;
  /** A retrying client gives up after this long (the soak then fails, naming the batch). */
  retryForMs?: number;
}

export interface CheckpointLogEntry {
  checkpointId: string;
  step: number;
  /** Answered 201 or 200 (answer set), or the error that ended its sending. */
  outcome: 'pending' | 'recorded' | 'failed';
  attempts: number;
  savedAt: number;
  recordedAt?: number;
  answer?: CheckpointAnswer;
  error?: string;
}

export class ChaosTrainer {
  readonly sim: SimulatedTrainer;
  readonly log: BatchLogEntry[] = [];
  readonly checkpoints: CheckpointLogEntry[] = [];
  /** Steps whose closing batch was refused on purpose (the refused-step fault). */
  readonly refusedSteps: number[] = [];
  private sending: Promise<void> = Promise.resolve();
  private readonly rand: () => number;

  constructor(private readonly opts: ChaosTrainerOptions) {
    this.sim = new SimulatedTrainer({
      gatewayUrl: opts.gatewayUrl,
      token: opts.token,
      campaignId: opts.campaignId,
      retryForMs: opts.retryForMs,
    });
    this.rand = xorshift32(opts.seed ^ 0x5eed);
  }

  async pool(): Promise<TaskRecord[]> {
    return this.sim.fetchPool();
  }

  /** Sends a batch as its client would: retrying through errors, or once. */
  private async send(entry: BatchLogEntry): Promise<void> {
    entry.attempts++;
    try {
      const value = await this.sim.postBatch(
        entry.step,
        {
          batchId: entry.batchId,
          policyVersion: `soak-policy-${entry.step}`,
          groups: entry.groups,
          close: entry.close,
        },
        { retry: entry.client === 'retrying' },
      );
      entry.status = value.status;
      if (entry.outcome !== 'accepted') entry.outcome = value.duplicate ? 'duplicate' : 'accepted';
    } catch (e) {
      entry.error = (e as Error).message.slice(0, 300);
      if (entry.outcome === 'accepted' || entry.outcome === 'duplicate') return;
      if (e instanceof GatewayError && e.status < 500 && e.status !== 429) {
        entry.status = e.status;
        entry.outcome = 'refused';
        return;
      }
      // A 5xx or a lost connection: the gateway may or may not have committed the batch.
      entry.outcome = 'unknown';
      if (entry.client === 'retrying') throw e;
    }
  }

  /** Reports a checkpoint saved after `step` (sent in the background, in order; see flushCheckpoints). */
  saveCheckpoint(step: number): void {
    const entry: CheckpointLogEntry = {
      checkpointId: `soak-ckpt-${step}`,
      step,
      outcome: 'pending',
      attempts: 0,
      savedAt: Date.now(),
    };
    this.checkpoints.push(entry);
    this.sending = this.sending.then(async () => {
      try {
        // Retried through 503 (checkpoint-ahead while a step up to it is not closed), 429 and outages.
        const r = await this.sim.postCheckpoint({ checkpointId: entry.checkpointId, runId: 'soak', step });
        entry.attempts++;
        entry.answer = r.answer;
        entry.outcome = 'recorded';
        entry.recordedAt = Date.now();
      } catch (e) {
        entry.outcome = 'failed';
        entry.error = (e as Error).message.slice(0, 300);
      }
    });
  }

  /** Waits until every checkpoint saved was answered for good. */
  async flushCheckpoints(): Promise<void> {
    await this.sending;
  }

  /**
   * A step whose report the gateway refuses: all its groups in one closing batch with a reward
   * out of range (422). Nothing of it is counted; the campaign passes over it (missing-step policy).
   */
  async refusedStep(step: number): Promise<number> {
    const tasks = await this.pool();
    const { groups } = this.sim.rollouts(step, tasks);
    const entry: BatchLogEntry = {
      step,
      batchId: `soak-${step}-refused`,
      close: true,
      client: 'retrying',
      groups: groups.map((g, i) => (i === 0 ? { ...g, rewards: [...g.rewards.slice(1), 1.5] } : g)),
      outcome: 'unknown',
      attempts: 0,
      status: null,
    };
    this.log.push(entry);
    await this.send(entry);
    if (entry.outcome !== 'refused' || entry.status !== 422)
      throw new Error(
        `step ${step}'s refused batch was answered ${entry.status} (${entry.outcome}), not 422`,
      );
    this.refusedSteps.push(step);
    return groups.length;
  }

  /** One step: rollouts of the pool, sent as several batches, the closing one last. */
  async step(step: number): Promise<{ groups: number; batches: number }> {
    const tasks = await this.pool();
    const { groups } = this.sim.rollouts(step, tasks);
    const n = Math.max(1, Math.min(this.opts.batchesPerStep ?? 3, groups.length));
    const parts: BatchLogEntry['groups'][] = Array.from({ length: n }, () => []);
    groups.forEach((g, i) => {
      parts[i % n]!.push(g);
    });
    const entries = parts.map(
      (p, i): BatchLogEntry => ({
        step,
        batchId: `soak-${step}-${i}`,
        close: i === n - 1,
        client: i < n - 1 && this.rand() < (this.opts.oneShotRate ?? 0.2) ? 'one-shot' : 'retrying',
        groups: p,
        outcome: 'unknown',
        attempts: 0,
        status: null,
      }),
    );
    this.log.push(...entries);
    const open = entries.slice(0, -1);
    const closing = entries[entries.length - 1]!;
    await Promise.all(
      open.map(async (e) => {
        await this.send(e);
        if (this.rand() < (this.opts.duplicateRate ?? 0.2)) await this.send(e);
      }),
    );
    await this.send(closing);
    if (this.rand() < (this.opts.duplicateRate ?? 0.2)) await this.send(closing);
    return { groups: groups.length, batches: n };
  }
}
