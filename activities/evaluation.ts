// The activities of a checkpoint's evaluation (workflows/evaluation.ts): open it (the task set,
// the checkpoint's manifest root, the bfcl-eval version: EvaluationStarted), score one held-out
// task with bfcl-eval's own multi-turn inference and checker in the environment executor
// (EvaluationTaskScored), and end it (EvaluationCompleted with accuracy per category, or
// EvaluationFailed with the reason). Every event id derives from the evaluation and the task, and a
// task already recorded is answered from the log without running it again: a worker killed
// mid-evaluation loses no finished task and scores none twice.
import { ApplicationFailure, Context } from '@temporalio/activity';
import type pg from 'pg';
import {
  accuracyByCategory,
  type EvaluationEndpoint,
  type EvaluationInput,
  type EvaluationTask,
} from '../domain/evaluation.js';
import { eventIds, streams } from '../domain/ids.js';
import { SEED_CATEGORIES, type SeedCategory } from '../domain/task.js';
import { DEFAULT_CONFIG } from '../platform/config/campaign-config.js';
import { loadCampaign } from '../platform/store/campaigns.js';
import { checkpointEvents } from '../platform/store/events/checkpoints.js';
import { append, readStreamOf } from '../platform/store/events/event-store.js';
import { workerEvent } from './events.js';
import { type ExecutorClient, ExecutorError, type TaskEvaluation } from './executor-client.js';

// The input's types are the domain's: `rods eval run` and the campaign's evaluation on checkpoint build it there.
export type { EvaluationEndpoint, EvaluationInput };

export interface OpenedEvaluation {
  tasks: EvaluationTask[];
  /** Tasks already recorded as scored (a resumed evaluation skips them). */
  scored: string[];
}

export interface EvaluationSummary {
  evaluationId: string;
  status: 'completed' | 'failed';
  categories: { category: string; correct: number; total: number }[];
  correct: number;
  total: number;
  reason?: string;
}

export interface EvaluationActivityDeps {
  pool: pg.Pool;
  executor: ExecutorClient;
  env?: NodeJS.ProcessEnv;
  now?: () => number;
}

// More than any BFCL multi-turn category holds (200 each in bfcl-eval 2026.3.23).
const ALL = 100_000;
const EVENT_TYPES = [
  'EvaluationStarted',
  'EvaluationTaskScored',
  'EvaluationCompleted',
  'EvaluationFailed',
] as const;

/** The endpoint's URL for a task: `{category}` replaced by the task's category. */
export const endpointFor = (baseUrl: string, category: string) => baseUrl.replaceAll('{category}', category);

const refused = (type: string, message: string) =>
  ApplicationFailure.create({ type, message, nonRetryable: true });

/** Whether the executor's error is the endpoint's (it answers 502/504 for an endpoint that failed). */
const endpointFailed = (e: unknown) => e instanceof ExecutorError && (e.status === 502 || e.status === 504);

export function createEvaluationActivities(deps: EvaluationActivityDeps) {
  const env = deps.env ?? process.env;
  const now = deps.now ?? Date.now;
  const events = (evaluationId: string) =>
    readStreamOf(deps.pool, streams.evaluation(evaluationId), EVENT_TYPES);
  const record = (evaluationId: string, e: Parameters<typeof append>[3][number]) =>
    append(deps.pool, streams.evaluation(evaluationId), 'any', [e]);

  const heldOut = async (input: EvaluationInput): Promise<EvaluationTask[]> => {
    const campaign = await loadCampaign(deps.pool, input.campaignId);
    const offset = (campaign?.config ?? DEFAULT_CONFIG).seeds?.perCategory ?? 100;
    const out: EvaluationTask[] = [];
    for (const category of input.categories ?? SEED_CATEGORIES)
      for (const t of await deps.executor.seeds(category, input.perCategory ?? ALL, offset))
        out.push({ taskId: t.id, category });
    return out;
  };

  /** Opens the evaluation once (EvaluationStarted), or reads what an earlier run of it recorded. */
  const openEvaluation = async (input: EvaluationInput): Promise<OpenedEvaluation> => {
    const recorded = await events(input.evaluationId);
    const started = recorded.find((e) => e.type === 'EvaluationStarted');
    const scoredIds = () =>
      recorded.flatMap((e) => (e.type === 'EvaluationTaskScored' ? [e.payload.taskId] : []));
    if (started?.type === 'EvaluationStarted')
      return { tasks: started.payload.tasks.map((t) => ({ ...t })), scored: scoredIds() };

    if (!(await loadCampaign(deps.pool, input.campaignId)))
      throw refused('UnknownCampaign', `unknown campaign ${JSON.stringify(input.campaignId)}`);
    let checkpoint: { trainerStep: number; manifestRoot: string } | null = null;
    if (input.checkpointId !== null) {
      const saved = await checkpointEvents(deps.pool, input.campaignId);
      const e = saved.find((c) => c.payload.checkpointId === input.checkpointId);
      if (!e)
        throw refused(
          'UnknownCheckpoint',
          `no checkpoint ${JSON.stringify(input.checkpointId)} recorded in campaign ${input.campaignId}` +
            ` (recorded: ${saved.map((c) => c.payload.checkpointId).join(', ') || 'none'})`,
        );
      checkpoint = { trainerStep: Number(e.payload.trainerStep), manifestRoot: e.payload.manifestRoot };
    }
    const tasks = input.tasks ?? (await heldOut(input));
    if (tasks.length === 0) throw refused('EmptyEvaluation', 'the evaluation has no task to score');
    const health = await deps.executor.health();
    await record(
      input.evaluationId,
      workerEvent('EvaluationStarted', eventIds.evaluationStarted(input.evaluationId), {
        evaluationId: input.evaluationId,
        campaignId: input.campaignId,
        checkpointId: input.checkpointId,
        trainerStep: checkpoint?.trainerStep ?? null,
        manifestRoot: checkpoint?.manifestRoot ?? null,
        endpoint: input.endpoint.baseUrl,
        model: input.endpoint.model,
        bfclEvalVersion: health.bfcl_eval_version,
        tasks,
        occurredAt: now(),
      }),
    );
    // Another run may have opened it first: what is recorded is the evaluation.
    return openEvaluation(input);
  };

  return {
    openEvaluation,

    /**
     * Scores one task: from the log when it was scored already, else by bfcl-eval in the executor,
     * then recorded. An endpoint that keeps failing ends the evaluation (non-retryable after
     * `endpointAttempts`); an executor or store that is away is waited for.
     */
    async scoreEvaluationTask(input: {
      evaluationId: string;
      campaignId: string;
      task: EvaluationTask;
      endpoint: EvaluationEndpoint;
      maxStepsPerTurn?: number;
      endpointAttempts?: number;
    }): Promise<{ valid: boolean; recorded: boolean }> {
      const id = eventIds.evaluationTaskScored(input.evaluationId, input.task.taskId);
      const done = (
        await readStreamOf(deps.pool, streams.evaluation(input.evaluationId), ['EvaluationTaskScored'])
      ).find((e) => e.eventId === id);
      if (done) return { valid: done.payload.valid, recorded: true };

      const { apiKeyEnv } = input.endpoint;
      const apiKey = apiKeyEnv ? env[apiKeyEnv] : undefined;
      if (apiKeyEnv && !apiKey)
        throw refused(
          'EndpointConfig',
          `the worker's environment variable ${apiKeyEnv} (the endpoint's API key) is not set`,
        );
      const ctx = Context.current();
      const beat = setInterval(() => ctx.heartbeat(), 5_000);
      let r: TaskEvaluation;
      try {
        r = await deps.executor.evaluateTask({
          taskId: input.task.taskId,
          category: input.task.category as SeedCategory,
          endpoint: {
            baseUrl: endpointFor(input.endpoint.baseUrl, input.task.category),
            model: input.endpoint.model,
            ...(apiKey ? { apiKey } : {}),
          },
          ...(input.maxStepsPerTurn !== undefined ? { maxStepsPerTurn: input.maxStepsPerTurn } : {}),
        });
      } catch (e) {
        if (endpointFailed(e)) {
          const attempts = input.endpointAttempts ?? 5;
          const message = `task ${input.task.taskId}: ${(e as Error).message} (attempt ${ctx.info.attempt} of ${attempts})`;
          if (ctx.info.attempt >= attempts) throw refused('EndpointFailed', message);
          throw ApplicationFailure.create({ type: 'EndpointFailed', message });
        }
        if (e instanceof ExecutorError && !e.retryable) throw refused('EvaluationRequestRefused', e.message);
        throw e;
      } finally {
        clearInterval(beat);
      }
      if (r.taskId !== input.task.taskId)
        throw new Error(`the executor scored ${r.taskId} when asked for ${input.task.taskId}`);
      await record(
        input.evaluationId,
        workerEvent('EvaluationTaskScored', id, {
          evaluationId: input.evaluationId,
          campaignId: input.campaignId,
          taskId: r.taskId,
          category: input.task.category,
          valid: r.valid,
          errorType: r.errorType,
          error: r.error === null ? null : r.error.slice(0, 2000),
          turns: r.turns,
          toolCalls: r.toolCalls,
          promptTokens: r.promptTokens,
          completionTokens: r.completionTokens,
          durationMs: r.durationMs,
          occurredAt: now(),
        }),
      );
      return { valid: r.valid, recorded: false };
    },

    /** Ends a fully scored evaluation: accuracy per category and overall (EvaluationCompleted). */
    async closeEvaluation(input: { evaluationId: string; campaignId: string }): Promise<EvaluationSummary> {
      const recorded = await events(input.evaluationId);
      const started = recorded.find((e) => e.type === 'EvaluationStarted');
      if (started?.type !== 'EvaluationStarted')
        throw new Error(`evaluation ${input.evaluationId} was never opened`);
      const verdicts = recorded.flatMap((e) =>
        e.type === 'EvaluationTaskScored'
          ? [{ taskId: e.payload.taskId, category: e.payload.category, valid: e.payload.valid }]
          : [],
      );
      const acc = accuracyByCategory(started.payload.tasks, verdicts);
      const missing = started.payload.tasks.length - acc.total;
      if (missing > 0) throw new Error(`evaluation ${input.evaluationId}: ${missing} task(s) not scored yet`);
      await record(
        input.evaluationId,
        workerEvent('EvaluationCompleted', eventIds.evaluationCompleted(input.evaluationId), {
          evaluationId: input.evaluationId,
          campaignId: input.campaignId,
          ...acc,
          occurredAt: now(),
        }),
      );
      return { evaluationId: input.evaluationId, status: 'completed', ...acc };
    },

    /** Ends an evaluation that cannot go on, with the reason; its scored tasks stay recorded. */
    async failEvaluation(input: {
      evaluationId: string;
      campaignId: string;
      reason: string;
    }): Promise<EvaluationSummary> {
      const recorded = await events(input.evaluationId);
      const scored = recorded.filter((e) => e.type === 'EvaluationTaskScored').length;
      await record(
        input.evaluationId,
        workerEvent('EvaluationFailed', eventIds.evaluationFailed(input.evaluationId), {
          evaluationId: input.evaluationId,
          campaignId: input.campaignId,
          reason: input.reason.slice(0, 2000),
          scored,
          occurredAt: now(),
        }),
      );
      return {
        evaluationId: input.evaluationId,
        status: 'failed',
        categories: [],
        correct: 0,
        total: scored,
        reason: input.reason,
      };
    },
  };
}

export type EvaluationActivities = ReturnType<typeof createEvaluationActivities>;
