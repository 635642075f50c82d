// The SIMULATED GRPO trainer (simulator/model.ts dynamics): it talks to rods only through the
// gateway's HTTP API, like a real trainer — fetch the pool (ETag), roll K=16 rollouts per task,
// post the step's scored groups and close the step.
import {
  childDifficulty,
  hash32,
  learn,
  rolloutGroup,
  type SimPolicy,
  type SimTask,
  seedDifficulty,
} from './model.js';

export interface SimTrainerOptions {
  gatewayUrl: string;
  token: string;
  campaignId: string;
  k?: number;
  learningRate?: number;
}

interface TaskRecord {
  id: string;
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

export class SimulatedTrainer {
  policy: SimPolicy;
  private etag: string | null = null;
  private pool: TaskRecord[] = [];
  private poolVersionValue = 0;
  private readonly difficulty = new Map<string, number>();

  constructor(private readonly opts: SimTrainerOptions) {
    this.policy = { skill: {}, learningRate: opts.learningRate ?? 0.1 };
  }

  private async call(path: string, init: RequestInit = {}): Promise<Response> {
    const r = await fetch(`${this.opts.gatewayUrl}${path}`, {
      ...init,
      headers: {
        authorization: `Bearer ${this.opts.token}`,
        'content-type': 'application/json',
        ...(init.headers ?? {}),
      },
    });
    if (r.status >= 400)
      throw new Error(`gateway ${init.method ?? 'GET'} ${path}: ${r.status} ${await r.text()}`);
    return r;
  }

  /** The active pool, re-downloaded only when its version (ETag) changed. */
  async fetchPool(): Promise<TaskRecord[]> {
    const r = await this.call(`/v1/campaigns/${this.opts.campaignId}/pool`, {
      headers: this.etag ? { 'if-none-match': this.etag } : {},
    });
    if (r.status === 304) return this.pool;
    const body = (await r.json()) as { version: number; tasks: { taskId: string; task: TaskRecord }[] };
    this.etag = r.headers.get('etag');
    this.pool = body.tasks.map((t) => ({ ...t.task, id: t.taskId }));
    this.poolVersionValue = body.version;
    return this.pool;
  }

  private simTask(t: TaskRecord): SimTask {
    let d = this.difficulty.get(t.id);
    if (d === undefined) {
      // Generated tasks are named <parent>~s<step>: they inherit a difficulty near the parent's.
      const cut = t.id.lastIndexOf('~');
      d =
        cut > 0
          ? childDifficulty(
              this.difficulty.get(t.id.slice(0, cut)) ?? seedDifficulty(t.id.slice(0, cut)),
              t.id,
            )
          : seedDifficulty(t.id);
      this.difficulty.set(t.id, d);
    }
    return {
      taskId: t.id,
      classes: t.involved_classes ?? [],
      turns: Math.max(1, t.ground_truth?.length ?? 1),
      difficulty: d,
    };
  }

  /** One training step: K rollouts per active task, posted as one closing batch. */
  async step(step: number): Promise<StepReport> {
    const tasks = await this.fetchPool();
    let sum = 0;
    let zero = 0;
    const groups = tasks.map((t) => {
      const sim = this.simTask(t);
      const rewards = rolloutGroup(
        this.policy,
        sim,
        this.opts.k ?? 16,
        hash32(`${this.opts.campaignId}:${step}:${t.id}`),
      );
      this.policy = learn(this.policy, sim, rewards);
      sum += rewards.reduce((a, b) => a + b, 0) / rewards.length;
      if (rewards.every((x) => x === rewards[0])) zero++;
      return { taskId: t.id, rewards };
    });
    await this.call(`/v1/campaigns/${this.opts.campaignId}/steps/${step}/rollouts`, {
      method: 'POST',
      body: JSON.stringify({
        batchId: `sim-${step}`,
        policyVersion: `sim-policy-${step}`,
        groups,
        close: true,
      }),
    });
    return {
      step,
      groups: groups.length,
      poolVersion: this.poolVersionValue,
      meanReward: groups.length ? sum / groups.length : 0,
      zeroVarianceGroups: zero,
    };
  }

  /** Waits until the campaign has planned `step` (the demo's progress follows the loop). */
  async waitPlanned(step: number, timeoutMs = 300_000): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const r = await this.call(`/v1/campaigns/${this.opts.campaignId}`);
      const s = (await r.json()) as { workflow: { step: number } | null };
      if ((s.workflow?.step ?? 0) >= step) return;
      if (Date.now() > deadline) throw new Error(`campaign did not plan step ${step} in time`);
      await new Promise((res) => setTimeout(res, 250));
    }
  }
}
