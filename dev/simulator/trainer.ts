// The SIMULATED GRPO trainer (simulator/model.ts, the model `npm run dev -- experiment` uses): it talks to
// rods only through the gateway's HTTP API, like a real trainer — fetch the pool (ETag), sample a
// batch of B tasks, roll K=16 rollouts per task, post the step's scored groups and close the step.

import { parentRef } from '../../domain/ids.js';
import {
  aimedDifficulty,
  expectedReward,
  groupStd,
  hash32,
  type ModelState,
  newModel,
  normal,
  rng,
  type SimTask,
  seedDifficulty,
  trainStep,
  turnSuccess,
} from './model.js';
import { PARAMETERS, type SimParameters } from './parameters.js';

export interface SimTrainerOptions {
  gatewayUrl: string;
  token: string;
  campaignId: string;
  k?: number;
  /** Overrides of the model's parameters (parameters.ts), e.g. batchTasks. */
  params?: Partial<SimParameters>;
  /** How long a request is retried through gateway errors and outages (default 15 minutes). */
  retryForMs?: number;
}

export interface TaskRecord {
  id: string;
  /** The pool's category of the task (its structure in the model). */
  category?: string;
  involved_classes?: string[];
  ground_truth?: unknown[];
}

export interface StepReport {
  step: number;
  groups: number;
  poolVersion: number;
  meanReward: number;
  zeroVarianceGroups: number;
}

/** A gateway answer other than 2xx/304, with its status (a trainer decides from it whether to retry). */
export class GatewayError extends Error {
  override name = 'GatewayError';
  constructor(
    message: string,
    readonly status: number,
    readonly retryAfterS?: number,
  ) {
    super(message);
  }
}

export interface RolledStep {
  groups: { taskId: string; rewards: number[] }[];
  meanReward: number;
  zeroVarianceGroups: number;
}

/**
 * The parent of a synthesized task id. `byRef` maps parentRef(id) to id for the tasks the trainer
 * has seen (a parent reaches the pool before its children): `<seed>~s<step>` names its seed,
 * `<root>~<parent key>~s<step>` (domain/ids.ts candidateId) the seen task with that key, the
 * legacy `<parent>~s<step>` its prefix; an Augment variant (`<base>~miss_func`) its base's parent
 * (the base candidate may never have joined the pool, its seed did).
 */
export function parentOf(taskId: string, byRef: ReadonlyMap<string, string> = new Map()): string | undefined {
  const ref = /^(.+)~s\d+(?:~[a-z_]+)?$/.exec(taskId)?.[1];
  return ref === undefined ? undefined : (byRef.get(ref) ?? ref);
}

/** The gateway's receipt of a recorded checkpoint. */
export interface CheckpointAnswer {
  checkpointId: string;
  manifestRoot: string;
  tasks: number;
  groups: number;
  duplicate: boolean;
}

export class SimulatedTrainer {
  readonly model: ModelState = newModel();
  readonly params: SimParameters;
  private etag: string | null = null;
  private pool: TaskRecord[] = [];
  private poolVersionValue = 0;
  private readonly tasks = new Map<string, SimTask>();
  /** parentRef(id) -> id of every task in `tasks`: how a child's id names its parent. */
  private readonly byRef = new Map<string, string>();
  /** Mean reward of each task's latest group (a child aims at its parent's). */
  private readonly lastMean = new Map<string, number>();

  constructor(private readonly opts: SimTrainerOptions) {
    this.params = { ...PARAMETERS, ...opts.params };
  }

  /**
   * One request to the gateway. Like a real trainer's client it retries 5xx, 429 and network
   * errors (a gateway restarting, a database outage) with backoff, Retry-After first, for up to
   * `retryForMs` (default 15 minutes); `retry: false` sends once. Other 4xx are thrown at once.
   */
  async call(path: string, init: RequestInit & { retry?: boolean } = {}): Promise<Response> {
    const { retry = true, ...req } = init;
    const deadline = Date.now() + (this.opts.retryForMs ?? 15 * 60_000);
    let delay = 200;
    for (let attempt = 1; ; attempt++) {
      try {
        return await this.callOnce(path, req);
      } catch (e) {
        const retryable = !(e instanceof GatewayError) || e.status >= 500 || e.status === 429;
        if (!retry || !retryable || Date.now() > deadline) {
          if (attempt > 1) (e as Error).message += ` (after ${attempt} attempts)`;
          throw e;
        }
        const hinted = e instanceof GatewayError && e.retryAfterS ? e.retryAfterS * 1000 : 0;
        await new Promise((r) => setTimeout(r, Math.max(hinted, delay * (0.5 + Math.random()))));
        delay = Math.min(delay * 2, 5000);
      }
    }
  }

  private async callOnce(path: string, init: RequestInit): Promise<Response> {
    const r = await fetch(`${this.opts.gatewayUrl}${path}`, {
      ...init,
      headers: {
        authorization: `Bearer ${this.opts.token}`,
        'content-type': 'application/json',
        ...(init.headers ?? {}),
      },
    });
    if (r.status >= 400) {
      const retryAfter = Number(r.headers.get('retry-after'));
      throw new GatewayError(
        `gateway ${init.method ?? 'GET'} ${path}: ${r.status} ${await r.text()}`,
        r.status,
        Number.isFinite(retryAfter) && retryAfter > 0 ? retryAfter : undefined,
      );
    }
    return r;
  }

  /** The active pool, re-downloaded only when its version (ETag) changed. */
  async fetchPool(): Promise<TaskRecord[]> {
    const r = await this.call(`/v1/campaigns/${this.opts.campaignId}/pool`, {
      headers: this.etag ? { 'if-none-match': this.etag } : {},
    });
    if (r.status === 304) return this.pool;
    const body = (await r.json()) as {
      version: number;
      tasks: { taskId: string; category?: string; task: TaskRecord }[];
    };
    this.etag = r.headers.get('etag');
    this.pool = body.tasks.map((t) => ({ category: t.category, ...t.task, id: t.taskId }));
    this.poolVersionValue = body.version;
    return this.pool;
  }

  /**
   * The model's task for a pool record: a seed's difficulty follows from its id; a synthesized
   * task is aimed at its parent's latest measured mean reward, with generator noise (model.ts).
   */
  private simTask(t: TaskRecord): SimTask {
    const known = this.tasks.get(t.id);
    if (known) return known;
    const shape = {
      taskId: t.id,
      category: t.category ?? 'base',
      classes: t.involved_classes ?? [],
      turns: Math.max(1, t.ground_truth?.length ?? 1),
    };
    const parentId = parentOf(t.id, this.byRef);
    let difficulty: number;
    if (parentId === undefined) difficulty = seedDifficulty(t.id, this.params);
    else {
      const parent = this.tasks.get(parentId);
      const measured =
        this.lastMean.get(parentId) ??
        (parent ? expectedReward(turnSuccess(this.model, parent), parent.turns) : 0.5);
      const noise = this.params.generatorNoiseSd * normal(rng(hash32(`generator:${t.id}`)));
      difficulty = aimedDifficulty(this.model, shape, measured, noise);
    }
    const task = { ...shape, difficulty };
    this.tasks.set(t.id, task);
    this.byRef.set(parentRef(t.id), t.id);
    return task;
  }

  get poolVersion(): number {
    return this.poolVersionValue;
  }

  /**
   * The step's batch: B tasks sampled from `tasks` (all of them when the pool is smaller), K
   * rollouts each; the model learns from each group as it goes.
   */
  rollouts(step: number, tasks: TaskRecord[]): RolledStep {
    let sum = 0;
    let zero = 0;
    const sims = tasks.map((t) => this.simTask(t));
    const trained = trainStep(this.model, sims, this.params.batchTasks, this.opts.k ?? 16, this.params, {
      batch: `batch:${this.opts.campaignId}:${step}`,
      rollouts: (taskId) => `${this.opts.campaignId}:${step}:${taskId}`,
    });
    const groups = trained.map(({ task: sim, rewards }) => {
      const mean = rewards.reduce((a, b) => a + b, 0) / rewards.length;
      this.lastMean.set(sim.taskId, mean);
      sum += mean;
      if (groupStd(rewards) === 0) zero++;
      return { taskId: sim.taskId, rewards };
    });
    return {
      groups,
      meanReward: groups.length ? sum / groups.length : 0,
      zeroVarianceGroups: zero,
    };
  }

  /** Posts one rollout batch of `step`; duplicate: the gateway had it already. */
  async postBatch(
    step: number,
    batch: { batchId: string; policyVersion: string; groups: RolledStep['groups']; close: boolean },
    opts: { retry?: boolean } = {},
  ): Promise<{ status: number; duplicate: boolean }> {
    const r = await this.call(`/v1/campaigns/${this.opts.campaignId}/steps/${step}/rollouts`, {
      ...opts,
      method: 'POST',
      body: JSON.stringify(batch),
    });
    const body = (await r.json()) as { duplicate?: boolean };
    return { status: r.status, duplicate: body.duplicate === true };
  }

  /**
   * Reports a checkpoint of the policy at `step` (one run, never resumed), as the Python adapters
   * do at each save; retried while the gateway waits for the step to close (503 checkpoint-ahead).
   */
  async checkpoint(step: number): Promise<CheckpointAnswer> {
    return (await this.postCheckpoint({ checkpointId: `sim-step-${step}`, runId: 'sim', step })).answer;
  }

  /** Posts a checkpoint report, retried through 5xx (503 checkpoint-ahead included), 429 and network errors. */
  async postCheckpoint(
    report: { checkpointId: string; runId: string; step: number },
    opts: { retry?: boolean } = {},
  ): Promise<{ status: number; answer: CheckpointAnswer }> {
    const r = await this.call(`/v1/campaigns/${this.opts.campaignId}/checkpoints`, {
      ...opts,
      method: 'POST',
      body: JSON.stringify(report),
    });
    return { status: r.status, answer: (await r.json()) as CheckpointAnswer };
  }

  /** One training step: K rollouts per sampled task, posted as one closing batch. */
  async step(step: number): Promise<StepReport> {
    const tasks = await this.fetchPool();
    const { groups, meanReward, zeroVarianceGroups } = this.rollouts(step, tasks);
    await this.postBatch(step, {
      batchId: `sim-${step}`,
      policyVersion: `sim-policy-${step}`,
      groups,
      close: true,
    });
    return {
      step,
      groups: groups.length,
      poolVersion: this.poolVersionValue,
      meanReward,
      zeroVarianceGroups,
    };
  }

  /** Waits until the campaign has planned `step` (the demo's progress follows the loop). */
  async waitPlanned(step: number, timeoutMs = 300_000): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const r = await this.call(`/v1/campaigns/${this.opts.campaignId}?holds=false`);
      const s = (await r.json()) as { workflow: { step: number } | null };
      if ((s.workflow?.step ?? 0) >= step) return;
      if (Date.now() > deadline) throw new Error(`campaign did not plan step ${step} in time`);
      await new Promise((res) => setTimeout(res, 250));
    }
  }
}
