// A campaign's history for checkpoint tests and benches, written by the writers the loop uses:
// tasks seeded through the pool projection (TaskSeeded), each step's reward groups through the
// aggregator's batch path (processBatch, the transaction that counts a group once and appends the
// step's statistics record) and the step closed by the aggregator's step closer. No Kafka: the
// records are handed to processBatch as a partition's fetch would hand them.
import { randomUUID } from 'node:crypto';
import type pg from 'pg';
import { candidateHash } from '../../../domain/candidate.js';
import { eventIds, streams } from '../../../domain/ids.js';
import { defaultRegistry } from '../../../platform/codec/registry.js';
import { registerCampaign } from '../../../platform/store/campaigns.js';
import { inTransaction } from '../../../platform/store/db.js';
import { typedEvent } from '../../../platform/store/events/event-store.js';
import { recordEventsIn } from '../../../platform/store/pool/projection.js';
import { type BatchDeps, processBatch, type RewardRecord } from '../../../stages/aggregator/batch.js';
import { CampaignCache } from '../../../stages/aggregator/campaign-cache.js';
import { closeReadySteps } from '../../../stages/aggregator/steps.js';
import { TaskStateCache } from '../../../stages/aggregator/task-cache.js';
import { encodeRecord } from '../../../stages/aggregator/trace.js';

/** A BFCL-shaped task record: what TaskSeeded carries and the manifest hashes. */
export const taskRecord = (id: string) => ({
  id,
  category: 'base',
  involved_classes: ['GorillaFileSystem'],
  initial_config: {},
  question: [[{ role: 'user', content: `do ${id}` }]],
  ground_truth: [['ls()']],
});

export class CampaignHistory {
  readonly campaignId: string;
  private readonly deps: BatchDeps;
  private readonly topic: string;
  private offset = 0;

  /** A new campaign `<prefix>-<random>` (start() registers it), or `existing`, to extend. */
  constructor(
    readonly pool: pg.Pool,
    prefix: string,
    existing?: string,
  ) {
    this.campaignId = existing ?? `${prefix}-${randomUUID().slice(0, 8)}`;
    // A topic name of its own: the partition offsets this writer's batches carry start at 0.
    this.topic = `history.${this.campaignId}.${randomUUID().slice(0, 8)}`;
    this.deps = {
      pool,
      registry: defaultRegistry(),
      campaigns: new CampaignCache(pool),
      groupId: `history-${this.campaignId}`,
      deadLetter: async () => {},
      tasks: new TaskStateCache(),
    };
  }

  /** Registers the campaign (any task id counted, the missing-step policy given) and seeds the tasks. */
  async start(tasks: readonly string[], config: Record<string, unknown> = {}): Promise<this> {
    await registerCampaign(this.pool, {
      campaignId: this.campaignId,
      config: { ...config, ingestion: { unknownTasks: 'accept', ...(config.ingestion as object) } },
    });
    await this.seed(tasks);
    return this;
  }

  async seed(tasks: readonly string[]): Promise<void> {
    const c = this.campaignId;
    await inTransaction(this.pool, (tx) =>
      recordEventsIn(
        tx,
        streams.campaign(c),
        tasks.map((taskId) =>
          typedEvent('TaskSeeded', {
            eventId: eventIds.taskSeeded(c, taskId),
            campaignId: c,
            taskId,
            category: 'base',
            task: JSON.stringify(taskRecord(taskId)),
            taskHash: candidateHash(taskRecord(taskId)),
            source: 'test',
            poolVersion: 1,
            occurredAt: Date.now(),
          }),
        ),
      ),
    );
  }

  /** One step: a group of `rollouts` rewards per task, then the step closed (unless `close` is false). */
  async step(step: number, tasks: readonly string[], opts: { rollouts?: number; close?: boolean } = {}) {
    const records: RewardRecord[] = [];
    for (const taskId of tasks) {
      const r = encodeRecord(
        {
          kind: 'group',
          group: {
            eventId: eventIds.simulatedRolloutGroup(this.campaignId, step, taskId),
            campaignId: this.campaignId,
            taskId,
            step,
            rewards: Array.from({ length: opts.rollouts ?? 4 }, (_, i) => (i % 2 === 0 ? 1 : 0)),
          },
        },
        this.campaignId,
      );
      records.push({ offset: String(this.offset++), key: Buffer.from(r.key), value: r.value });
    }
    if (opts.close !== false) {
      const close = encodeRecord({ kind: 'close', step, groupCount: tasks.length }, this.campaignId);
      records.push({ offset: String(this.offset++), key: Buffer.from(close.key), value: close.value });
    }
    await processBatch(this.deps, this.topic, 0, records);
    await closeReadySteps(this.pool, [this.campaignId]);
  }

  /** Steps from..to, each training every task. */
  async steps(from: number, to: number, tasks: readonly string[]): Promise<void> {
    for (let s = from; s <= to; s++) await this.step(s, tasks);
  }
}
