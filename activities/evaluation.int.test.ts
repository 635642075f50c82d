// The evaluation's bookkeeping against the real PostgreSQL: what is opened (the checkpoint's
// manifest root, the held-out tasks past the campaign's seeds), each task scored once however often
// its activity runs, endpoint failures retried then ended with the reason, accuracy per category.
// The executor here is scripted (its bfcl-eval route is exercised end to end in
// workflows/evaluation.e2e.test.ts); everything else is the real store.
import { randomUUID } from 'node:crypto';
import { ApplicationFailure } from '@temporalio/common';
import { MockActivityEnvironment } from '@temporalio/testing';
import { afterAll, describe, expect, it } from 'vitest';
import { streams } from '../domain/ids.js';
import type { TaskRecord } from '../domain/task.js';
import { registerCampaign } from '../platform/store/campaigns.js';
import { createPool } from '../platform/store/db.js';
import { evaluationView } from '../platform/store/events/evaluations.js';
import { readStream } from '../platform/store/events/event-store.js';
import { recordTestCheckpoint } from '../test/support/checkpoints/recorded.js';
import { createEvaluationActivities, type EvaluationInput } from './evaluation.js';
import {
  type EvaluateTaskRequest,
  type ExecutorClient,
  ExecutorError,
  type TaskEvaluation,
} from './executor-client.js';

const pool = createPool({ application: 'rods-evaluation-test', max: 4 });
afterAll(() => pool.end());

/** An executor whose seeds are ids by offset and whose verdicts are scripted per task. */
function scriptedExecutor(verdict: (taskId: string) => boolean | 'endpoint-down') {
  const calls: EvaluateTaskRequest[] = [];
  const seedCalls: [string, number, number][] = [];
  const executor = {
    url: 'http://scripted',
    health: async () => ({ bfcl_eval_version: '2026.3.23' }),
    seeds: async (category: string, limit: number, offset: number) => {
      seedCalls.push([category, limit, offset]);
      return Array.from({ length: Math.min(limit, 3) }, (_, i) => ({
        id: `multi_turn_${category}_${offset + i}`,
      })) as TaskRecord[];
    },
    evaluateTask: async (req: EvaluateTaskRequest): Promise<TaskEvaluation> => {
      calls.push(req);
      const v = verdict(req.taskId);
      if (v === 'endpoint-down')
        throw new ExecutorError(
          `POST http://scripted/evaluations/task: HTTP 502: the endpoint ${req.endpoint.baseUrl} is not reachable`,
          'http',
          502,
        );
      return {
        taskId: req.taskId,
        category: req.category,
        valid: v,
        errorType: v ? null : 'multi_turn:instance_state_mismatch',
        error: v ? null : 'state differs',
        turns: 2,
        toolCalls: 3,
        promptTokens: 100,
        completionTokens: 10,
        durationMs: 40,
        bfclEvalVersion: '2026.3.23',
        model: req.endpoint.model,
      };
    },
  };
  return { executor: executor as unknown as ExecutorClient, calls, seedCalls };
}

async function campaignWithCheckpoint() {
  const campaignId = `eval-${randomUUID().slice(0, 8)}`;
  await registerCampaign(pool, { campaignId, config: { seeds: { perCategory: 4 } } });
  await recordTestCheckpoint(pool, campaignId, {
    checkpointId: 'run-1-step-3',
    trainerStep: 3,
    manifestRoot: 'ab'.repeat(32),
  });
  return campaignId;
}

const input = (campaignId: string, over: Partial<EvaluationInput> = {}): EvaluationInput => ({
  evaluationId: `${campaignId}~run-1-step-3~test`,
  campaignId,
  checkpointId: 'run-1-step-3',
  endpoint: { baseUrl: 'http://127.0.0.1:9/v1', model: 'ckpt-3' },
  categories: ['base', 'miss_func'],
  perCategory: 2,
  ...over,
});

/** Runs an activity in a mock activity context (attempt 1 unless given), typed by the activity. */
const run = <A extends unknown[], R>(fn: (...a: A) => Promise<R>, ...a: A): Promise<R> =>
  new MockActivityEnvironment().run(fn, ...a) as Promise<R>;
const runAt = <A extends unknown[], R>(attempt: number, fn: (...a: A) => Promise<R>, ...a: A): Promise<R> =>
  new MockActivityEnvironment({ attempt }).run(fn, ...a) as Promise<R>;

describe('evaluation activities', () => {
  it('open the held-out tasks past the seeds with the manifest root, score each once, and close with accuracy per category', async () => {
    const campaignId = await campaignWithCheckpoint();
    const valid = new Set(['multi_turn_base_4', 'multi_turn_miss_func_5']);
    const ex = scriptedExecutor((id) => valid.has(id));
    const acts = createEvaluationActivities({ pool, executor: ex.executor });
    const req = input(campaignId);

    const opened = await run(acts.openEvaluation, req);
    // The campaign's seeds are the first 4 of each category: the held-out split starts after them.
    expect(ex.seedCalls).toEqual([
      ['base', 2, 4],
      ['miss_func', 2, 4],
    ]);
    expect(opened.tasks.map((t) => t.taskId)).toEqual([
      'multi_turn_base_4',
      'multi_turn_base_5',
      'multi_turn_miss_func_4',
      'multi_turn_miss_func_5',
    ]);
    expect(opened.scored).toEqual([]);

    for (const task of opened.tasks.slice(0, 3))
      await run(acts.scoreEvaluationTask, {
        evaluationId: req.evaluationId,
        campaignId,
        task,
        endpoint: req.endpoint,
      });
    // Run again (a worker that died after recording): answered from the log, the endpoint not asked.
    const again = await run(acts.scoreEvaluationTask, {
      evaluationId: req.evaluationId,
      campaignId,
      task: opened.tasks[0]!,
      endpoint: req.endpoint,
    });
    expect(again).toEqual({ valid: true, recorded: true });
    expect(ex.calls.map((c) => c.taskId)).toEqual(opened.tasks.slice(0, 3).map((t) => t.taskId));

    // Opened again (a resumed workflow): the same tasks, three scored; a close now is refused.
    const reopened = await run(acts.openEvaluation, req);
    expect(reopened.tasks).toEqual(opened.tasks);
    expect(reopened.scored.sort()).toEqual(
      opened.tasks
        .slice(0, 3)
        .map((t) => t.taskId)
        .sort(),
    );
    await expect(run(acts.closeEvaluation, { evaluationId: req.evaluationId, campaignId })).rejects.toThrow(
      /1 task\(s\) not scored yet/,
    );

    await run(acts.scoreEvaluationTask, {
      evaluationId: req.evaluationId,
      campaignId,
      task: opened.tasks[3]!,
      endpoint: req.endpoint,
    });
    const summary = await run(acts.closeEvaluation, { evaluationId: req.evaluationId, campaignId });
    expect(summary.categories).toEqual([
      { category: 'base', correct: 1, total: 2 },
      { category: 'miss_func', correct: 1, total: 2 },
    ]);
    expect([summary.correct, summary.total]).toEqual([2, 4]);

    const v = await evaluationView(pool, req.evaluationId);
    expect(v).toMatchObject({
      status: 'completed',
      checkpointId: 'run-1-step-3',
      trainerStep: 3,
      manifestRoot: 'ab'.repeat(32),
      model: 'ckpt-3',
      bfclEvalVersion: '2026.3.23',
      scored: 4,
      correct: 2,
      taskMs: 160,
    });
    // One event per task, one start, one completion, whatever ran twice.
    const types = (await readStream(pool, streams.evaluation(req.evaluationId))).map((e) => e.type);
    expect(types.filter((t) => t === 'EvaluationTaskScored')).toHaveLength(4);
    expect(types.filter((t) => t !== 'EvaluationTaskScored')).toEqual([
      'EvaluationStarted',
      'EvaluationCompleted',
    ]);
  });

  it('refuse an unknown checkpoint by name, with those recorded', async () => {
    const campaignId = await campaignWithCheckpoint();
    const acts = createEvaluationActivities({ pool, executor: scriptedExecutor(() => true).executor });
    const err = await run(acts.openEvaluation, input(campaignId, { checkpointId: 'run-9-step-1' })).catch(
      (e: unknown) => e,
    );
    expect(err).toBeInstanceOf(ApplicationFailure);
    expect((err as ApplicationFailure).nonRetryable).toBe(true);
    expect((err as Error).message).toBe(
      `no checkpoint "run-9-step-1" recorded in campaign ${campaignId} (recorded: run-1-step-3)`,
    );
  });

  it('retry a task whose endpoint fails, then end the evaluation with the reason after the last attempt', async () => {
    const campaignId = await campaignWithCheckpoint();
    const ex = scriptedExecutor(() => 'endpoint-down');
    const acts = createEvaluationActivities({ pool, executor: ex.executor });
    const req = input(campaignId, { tasks: [{ taskId: 'multi_turn_base_150', category: 'base' }] });
    await run(acts.openEvaluation, req);
    const score = (attempt: number) =>
      runAt(attempt, acts.scoreEvaluationTask, {
        evaluationId: req.evaluationId,
        campaignId,
        task: req.tasks![0]!,
        endpoint: req.endpoint,
        endpointAttempts: 3,
      }).then(
        () => {
          throw new Error('scored although the endpoint is down');
        },
        (e: unknown) => e as ApplicationFailure,
      );
    const first = await score(1);
    expect(first.nonRetryable).toBe(false);
    const last = await score(3);
    expect(last.nonRetryable).toBe(true);
    expect(last.message).toMatch(
      /^task multi_turn_base_150: .*HTTP 502: the endpoint http:\/\/127\.0\.0\.1:9\/v1 is not reachable \(attempt 3 of 3\)$/,
    );
    await run(acts.failEvaluation, {
      evaluationId: req.evaluationId,
      campaignId,
      reason: last.message,
    });
    const v = await evaluationView(pool, req.evaluationId);
    expect(v).toMatchObject({ status: 'failed', reason: last.message, scored: 0, tasks: 1 });
  });

  it("take the endpoint's key from the worker's environment, never from the input", async () => {
    const campaignId = await campaignWithCheckpoint();
    const ex = scriptedExecutor(() => true);
    const acts = createEvaluationActivities({
      pool,
      executor: ex.executor,
      env: { EVAL_KEY: 'sk-secret-1' },
    });
    const req = input(campaignId, {
      tasks: [{ taskId: 'multi_turn_base_150', category: 'base' }],
      endpoint: { baseUrl: 'http://127.0.0.1:9/v1', model: 'm', apiKeyEnv: 'EVAL_KEY' },
    });
    await run(acts.openEvaluation, req);
    await run(acts.scoreEvaluationTask, {
      evaluationId: req.evaluationId,
      campaignId,
      task: req.tasks![0]!,
      endpoint: req.endpoint,
    });
    expect(ex.calls[0]!.endpoint.apiKey).toBe('sk-secret-1');
    const recorded = JSON.stringify(await readStream(pool, streams.evaluation(req.evaluationId)));
    expect(recorded).not.toContain('sk-secret-1');
    const missing = createEvaluationActivities({ pool, executor: ex.executor, env: {} });
    const err = await run(missing.scoreEvaluationTask, {
      evaluationId: `${req.evaluationId}-2`,
      campaignId,
      task: req.tasks![0]!,
      endpoint: req.endpoint,
    }).catch((e: unknown) => e);
    expect((err as Error).message).toBe(
      "the worker's environment variable EVAL_KEY (the endpoint's API key) is not set",
    );
  });
});
