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
  /** How long a request is retried through gateway errors and outages (default 15 minutes). */
  retryForMs?: number;
}

export interface TaskRecord {
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

export class SimulatedTrainer {
  policy: SimPolicy;
  private etag: string | null = null;
  private pool: TaskRecord[] = [];
  private poolVersionValue = 0;
  private readonly difficulty = new Map<string, number>();

  constructor(private readonly opts: SimTrainerOptions) {
    this.policy = { skill: {}, learningRate: opts.learningRate ?? 0.1 };
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

  get poolVersion(): number {
    return this.poolVersionValue;
  }

  /** K rollouts of each task at `step`; the policy learns from each group as it goes. */
  rollouts(step: number, tasks: TaskRecord[]): RolledStep {
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

  /** One training step: K rollouts per active task, posted as one closing batch. */
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
