// The whole loop in one process for tests and benchmarks: the real aggregator, a rods worker,
// a campaign workflow, and a SIMULATED trainer (simulator/model.ts) that produces reward groups
// for the active pool step by step. The generator is the operator's endpoint the campaign config
// names, given to the in-process worker with `endpoints` (the stand-in in tests).
import { randomUUID } from 'node:crypto';
import type { Client } from '@temporalio/client';
import type { Worker, WorkflowBundleWithSourceMap } from '@temporalio/worker';
import { type GeneratorEndpointInput, GeneratorEndpoints } from '../../activities/llm/endpoints.js';
import { createRodsWorker } from '../../activities/worker.js';
import { parseNewCampaignConfig } from '../../domain/campaign-config.js';
import type { CampaignStatus } from '../../domain/campaign-state.js';
import { eventIds, streams, workflowIds } from '../../domain/ids.js';
import { encode } from '../../platform/codec/registry.js';
import { openKafka, type RecordProducer, withAdmin } from '../../platform/kafka/client.js';
import { registerCampaign } from '../../platform/store/campaigns.js';
import { createPool, type Pool } from '../../platform/store/db.js';
import { readStreamOf } from '../../platform/store/events/event-store.js';
import { type ActiveMemberRow, activeMemberRows } from '../../platform/store/pool/members.js';
import { batchWorkflowIds } from '../../platform/store/steps/batches.js';
import { executeUpdateWithRetry, temporalClient, workflowEnd } from '../../platform/temporal/connect.js';
import { AggregatorService } from '../../stages/aggregator/service.js';
import { freshRewardTopic } from '../../stages/aggregator/trace.js';
import { waitUntil } from '../../test/support/wait.js';
import { campaignWorkflow } from '../../workflows/campaign.js';
import {
  childDifficulty,
  hash32,
  learn,
  rolloutGroup,
  type SimPolicy,
  type SimTask,
  seedDifficulty,
} from '../simulator/toy-model.js';

export interface LoopOptions {
  config: Record<string, unknown>;
  /** The in-process worker's generator endpoints (else those of the environment). */
  endpoints?: Record<string, GeneratorEndpointInput>;
  /** The in-process worker's bundle (else it bundles workflows/ itself). */
  workflowBundle?: WorkflowBundleWithSourceMap;
  /** The campaign was registered and its workflow started elsewhere (e.g. through the gateway). */
  created?: boolean;
  /** Start an in-process worker (default true; false when the test runs workers as processes). */
  worker?: boolean;
  untilStep?: number;
  campaignId?: string;
  taskQueue?: string;
}

export type MemberRow = ActiveMemberRow<{ involved_classes?: string[]; ground_truth?: unknown[] }>;

export class LoopHarness {
  readonly campaignId: string;
  readonly taskQueue: string;
  readonly pool: Pool;
  topic = '';
  client!: Client;
  private closeClient?: () => Promise<void>;
  private aggregator?: AggregatorService;
  private worker?: { worker: Worker; close: () => Promise<void>; running: Promise<void> };
  private producer?: RecordProducer;
  policy: SimPolicy = { skill: {}, learningRate: 0.6 };
  private difficulty = new Map<string, number>();

  constructor(private readonly opts: LoopOptions) {
    this.campaignId = opts.campaignId ?? `loop-${randomUUID().slice(0, 8)}`;
    this.taskQueue = opts.taskQueue ?? `rods-test-${this.campaignId}`;
    this.pool = createPool({ application: 'rods-loop-harness', max: 10 });
  }

  get workflowId(): string {
    return workflowIds.campaign(this.campaignId);
  }

  /**
   * A started loop whose campaign synthesises nothing (no selection budget): for tests where the
   * steps being closed and planned are the whole effect looked at.
   */
  static async stepsOnly(name: string, workflowBundle?: WorkflowBundleWithSourceMap): Promise<LoopHarness> {
    const loop = new LoopHarness({
      ...(workflowBundle ? { workflowBundle } : {}),
      campaignId: `${name}-${randomUUID().slice(0, 8)}`,
      config: {
        seeds: { perCategory: 1 },
        selection: { budgetPerStep: 0, perCategoryQuota: {}, cooldownSteps: 0, maxConcurrentSyntheses: 1 },
        // Its tests report rewards for tasks of their own through the gateway.
        ingestion: { unknownTasks: 'accept' },
      },
    });
    await loop.start();
    return loop;
  }

  async start(): Promise<void> {
    this.topic = await freshRewardTopic('loop.rewards', 3);
    let recorded: unknown = this.opts.config;
    if (!this.opts.created) {
      // As the gateway and the CLI would: a config with a generator URL, key or header is refused.
      parseNewCampaignConfig(this.opts.config);
      recorded = (
        await registerCampaign(this.pool, { campaignId: this.campaignId, config: this.opts.config })
      ).rawConfig;
    }
    this.aggregator = new AggregatorService(this.pool, {
      groupId: `agg-${this.campaignId}`,
      topic: this.topic,
      logLevel: 'warn',
    });
    await this.aggregator.start();
    if (this.opts.worker !== false) await this.startWorker();
    const { client, close } = await temporalClient();
    this.client = client;
    this.closeClient = close;
    this.producer = await openKafka({ clientId: 'rods-sim-trainer' }).producer({ idempotent: true });
    if (this.opts.created) return;
    await client.workflow.start(campaignWorkflow, {
      taskQueue: this.taskQueue,
      workflowId: this.workflowId,
      args: [{ campaignId: this.campaignId, config: recorded, untilStep: this.opts.untilStep }],
    });
  }

  async startWorker(): Promise<void> {
    const w = await createRodsWorker({
      pool: this.pool,
      taskQueue: this.taskQueue,
      ...(this.opts.workflowBundle ? { workflowBundle: this.opts.workflowBundle } : {}),
      sinkDir: `.stack/test-sink`,
      ...(this.opts.endpoints ? { generatorEndpoints: GeneratorEndpoints.of(this.opts.endpoints) } : {}),
    });
    this.worker = { ...w, running: w.worker.run() };
  }

  async stopWorker(): Promise<void> {
    if (!this.worker) return;
    this.worker.worker.shutdown();
    await this.worker.running;
    await this.worker.close();
    this.worker = undefined;
  }

  async status(): Promise<CampaignStatus> {
    return this.client.workflow.getHandle(this.workflowId).query<CampaignStatus>('status');
  }

  async activeMembers(): Promise<MemberRow[]> {
    return activeMemberRows(this.pool, this.campaignId);
  }

  private simTask(m: MemberRow): SimTask {
    let d = this.difficulty.get(m.task_id);
    if (d === undefined) {
      d =
        m.origin === 'seed'
          ? seedDifficulty(m.task_id)
          : childDifficulty(
              this.difficulty.get(m.parents[0] ?? '') ?? seedDifficulty(m.parents[0] ?? m.task_id),
              m.task_id,
            );
      this.difficulty.set(m.task_id, d);
    }
    const task = typeof m.task === 'string' ? (JSON.parse(m.task) as MemberRow['task']) : m.task;
    return {
      taskId: m.task_id,
      classes: task.involved_classes ?? [],
      turns: Math.max(1, task.ground_truth?.length ?? 1),
      difficulty: d,
    };
  }

  /** The simulated trainer's step: K=16 rollouts for every active task, then StepClosed. */
  async trainStep(step: number): Promise<{ groups: number }> {
    const members = await this.activeMembers();
    const messages = members.map((m) => {
      const t = this.simTask(m);
      const rewards = rolloutGroup(this.policy, t, 16, hash32(`${this.campaignId}:${step}:${m.task_id}`));
      this.policy = learn(this.policy, t, rewards);
      return {
        key: m.task_id,
        value: encode('RolloutGroupScored', {
          eventId: eventIds.simulatedRolloutGroup(this.campaignId, step, m.task_id),
          campaignId: this.campaignId,
          taskId: m.task_id,
          step,
          policyVersion: `sim-${step}`,
          rewards,
          producedAt: Date.now(),
        }),
      };
    });
    messages.push({
      key: `${this.campaignId}/close`,
      value: encode('StepClosed', {
        eventId: eventIds.simulatedStepClosed(this.campaignId, step),
        campaignId: this.campaignId,
        step,
        groupCount: members.length,
        producedAt: Date.now(),
      }),
    });
    await this.producer!.send(this.topic, messages);
    return { groups: members.length };
  }

  /** Waits until the campaign workflow has planned `step`. */
  async waitPlanned(step: number, timeoutMs = 120_000): Promise<CampaignStatus> {
    let last: CampaignStatus | undefined;
    return waitUntil(
      async () => {
        // A query can fail while a worker restarts; the next poll asks again.
        last = (await this.status().catch(() => undefined)) ?? last;
        return last && last.step >= step ? last : undefined;
      },
      {
        what: () => `campaign ${this.campaignId} to plan step ${step} (at ${last?.step})`,
        timeoutMs,
        intervalMs: 200,
      },
    );
  }

  /** Terminates these workflows (children a test left hanging); ids already closed are skipped. */
  async terminate(workflowIds: Iterable<string>): Promise<void> {
    for (const id of workflowIds)
      await this.client.workflow
        .getHandle(id)
        .terminate('test over')
        .catch(() => {});
  }

  /** Terminates the ingestion workflows of the campaign's rollout batches (tests that post batches). */
  async terminateIngestions(): Promise<void> {
    await this.terminate(await batchWorkflowIds(this.pool, this.campaignId));
  }

  /** Waits until the campaign's running set no longer holds this synthesis (its slot is free). */
  async waitSlotFreed(synthesisId: string, timeoutMs = 60_000): Promise<CampaignStatus> {
    return waitUntil(
      async () => {
        // A query can time out on a busy machine; the next poll asks again.
        const now = await this.status().catch(() => undefined);
        return now && !(synthesisId in now.running) ? now : undefined;
      },
      { what: `campaign ${this.campaignId} to free the slot of ${synthesisId}`, timeoutMs, intervalMs: 200 },
    );
  }

  /** The reason codes of the CandidateRejected events of one synthesis, with their seeds. */
  async rejections(synthesisId: string): Promise<{ reason_code: string; seed: string }[]> {
    const rejected = await readStreamOf(this.pool, streams.synthesis(synthesisId), ['CandidateRejected']);
    return rejected.map((e) => ({ reason_code: e.payload.reasonCode, seed: e.payload.seedTaskId }));
  }

  /**
   * Stops the campaign, waits until its workflow completes (it waits for its running syntheses)
   * and returns its result; then replays the history of its current run against the bundle.
   */
  async stopAndReplay(
    bundle: WorkflowBundleWithSourceMap,
    timeoutMs = 60_000,
  ): Promise<{
    result: CampaignStatus;
    patched: boolean;
  }> {
    const handle = this.client.workflow.getHandle(this.workflowId);
    await executeUpdateWithRetry(handle, 'stop', [{ reason: 'test' }]);
    await waitUntil(async () => (await workflowEnd(this.client, this.workflowId)) === 'completed', {
      what: `the stopped campaign ${this.campaignId} to complete`,
      timeoutMs,
      intervalMs: 200,
    });
    const result = (await handle.result()) as CampaignStatus;
    const history = await handle.fetchHistory();
    const { Worker } = await import('@temporalio/worker');
    await Worker.runReplayHistory({ workflowBundle: bundle }, history, this.workflowId);
    return {
      result,
      patched:
        history.events?.some((e) => e.markerRecordedEventAttributes?.markerName === 'core_patch') ?? false,
    };
  }

  /** Waits until no synthesis is running. */
  async waitSynthesesDone(timeoutMs = 180_000): Promise<CampaignStatus> {
    let running: string[] = [];
    return waitUntil(
      async () => {
        const s = await this.status();
        running = Object.keys(s.running);
        return running.length === 0 ? s : undefined;
      },
      {
        what: () => `the syntheses to finish (still running: ${running.join(', ')})`,
        timeoutMs,
        intervalMs: 250,
      },
    );
  }

  async close(): Promise<void> {
    await this.client?.workflow
      .getHandle(this.workflowId)
      .terminate('test over')
      .catch(() => {});
    await this.stopWorker();
    await this.aggregator?.stop();
    await this.producer?.disconnect().catch(() => {});
    await this.closeClient?.();
    if (this.topic) await withAdmin((a) => a.deleteTopics([this.topic])).catch(() => {});
    await this.pool.end();
  }
}
