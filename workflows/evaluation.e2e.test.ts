import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ExecutorClient } from '../activities/executor-client.js';
import { fetchPolicyTasks, Policy } from '../dev/standin/policy.js';
import { type StandinServer, startStandin } from '../dev/standin/server.js';
import { streams } from '../domain/ids.js';
import { registerCampaign } from '../platform/store/campaigns.js';
import { createPool } from '../platform/store/db.js';
import { evaluationIds, evaluationView } from '../platform/store/events/evaluations.js';
import { readStreamOf } from '../platform/store/events/event-store.js';
import { freePort } from '../platform/util/free-port.js';
import { recordTestCheckpoint } from '../test/support/checkpoints/recorded.js';
import { waitUntil } from '../test/support/wait.js';
import { workerProcesses } from '../test/support/worker-process.js';

const pool = createPool({ application: 'rods-evaluation-e2e', max: 4 });
const TASK_QUEUE = `eval-e2e-${randomUUID().slice(0, 8)}`;
const campaignId = `eval-e2e-${randomUUID().slice(0, 8)}`;
const CHECKPOINT = 'run-1-step-4';
const PER_CATEGORY = 4;
// Held-out tasks start past the campaign's 100 seeds per category: _100 to _103 of each.
const RIGHT = [
  'multi_turn_base_100',
  'multi_turn_base_101',
  'multi_turn_base_103',
  'multi_turn_miss_func_102',
  'multi_turn_miss_param_100',
  'multi_turn_miss_param_101',
];
const EXPECTED = [
  { category: 'base', correct: 3, total: 4 },
  { category: 'miss_func', correct: 1, total: 4 },
  { category: 'miss_param', correct: 2, total: 4 },
  { category: 'long_context', correct: 0, total: 4 },
];

let standin: StandinServer;

const workers = workerProcesses(TASK_QUEUE);
const { rods, kill9 } = workers;
const startWorker = () => workers.start();

beforeAll(async () => {
  const executor = new ExecutorClient();
  const tasks = await fetchPolicyTasks((c, limit, offset) => executor.seeds(c, limit, offset));
  // Slow enough (a task is several answers) that the kill lands while tasks remain.
  standin = await startStandin({
    port: await freePort(),
    policy: new Policy({ tasks, correct: RIGHT }),
    policyDelayMs: 250,
  });
  await registerCampaign(pool, { campaignId });
  await recordTestCheckpoint(pool, campaignId, {
    checkpointId: CHECKPOINT,
    trainerStep: 4,
    manifestRoot: 'cd'.repeat(32),
  });
}, 120_000);

afterAll(async () => {
  await workers.killAll();
  await standin?.close();
  await pool.end();
});

describe('evaluation of a checkpoint', () => {
  it('scores the held-out tasks with bfcl-eval to the known accuracy, through a worker killed mid-evaluation', async () => {
    let worker = startWorker();
    const started = JSON.parse(
      (
        await rods([
          'eval',
          'run',
          '--campaign',
          campaignId,
          '--checkpoint',
          CHECKPOINT,
          '--endpoint',
          `${standin.url.replace(/\/v1$/, '')}/policy/{category}/v1`,
          '--model',
          'ckpt-4',
          '--per-category',
          String(PER_CATEGORY),
          '--no-wait',
          '--json',
        ])
      ).stdout,
    ) as { evaluationId: string };
    const id = started.evaluationId;
    expect(id).toMatch(new RegExp(`^${campaignId}~${CHECKPOINT}~[0-9a-f]{12}$`));

    // Kill the worker once three tasks are scored and more remain.
    await waitUntil(async () => ((await evaluationView(pool, id))?.scored ?? 0) >= 3, {
      timeoutMs: 180_000,
      what: 'three tasks scored',
    });
    await kill9(worker);
    const atKill = (await evaluationView(pool, id))!;
    expect(atKill.scored).toBeLessThan(atKill.tasks);
    const asked = { ...standin.stats.policy.tasks };
    const finished = atKill.outcomes.map((o) => o.taskId);

    worker = startWorker();
    await waitUntil(async () => (await evaluationView(pool, id))?.status === 'completed', {
      timeoutMs: 300_000,
      what: 'the evaluation to complete after the restart',
    });
    const v = (await evaluationView(pool, id))!;
    expect(v.categories).toEqual(EXPECTED);
    expect([v.correct, v.total, v.scored, v.tasks]).toEqual([6, 16, 16, 16]);
    expect(v).toMatchObject({ manifestRoot: 'cd'.repeat(32), trainerStep: 4, model: 'ckpt-4' });
    expect(v.bfclEvalVersion).toBe('2026.3.23');
    // Each task right exactly when the policy answered it right; a wrong one is bfcl's verdict.
    for (const o of v.outcomes) {
      expect(o.valid, o.taskId).toBe(RIGHT.includes(o.taskId));
      if (!o.valid) expect(o.errorType).toMatch(/^multi_turn:/);
    }
    // Scored once each, and what had finished before the kill was not asked of the policy again.
    const scored = await readStreamOf(pool, streams.evaluation(id), ['EvaluationTaskScored']);
    expect(scored.map((e) => e.payload.taskId).sort()).toEqual(v.outcomes.map((o) => o.taskId).sort());
    expect(new Set(scored.map((e) => e.payload.taskId)).size).toBe(16);
    for (const t of finished) expect(standin.stats.policy.tasks[t], t).toBe(asked[t]);

    // `rods eval show` reads it; running the same evaluation again resumes it and scores nothing.
    const shown = JSON.parse((await rods(['eval', 'show', id, '--json'])).stdout) as {
      status: string;
      overall: { correct: number; total: number; interval95: [number, number] };
      outcomes: unknown[];
    };
    expect(shown.status).toBe('completed');
    expect(shown.overall).toMatchObject({ correct: 6, total: 16 });
    expect(shown.overall.interval95[0]).toBeLessThan(6 / 16);
    expect(shown.outcomes).toHaveLength(16);
  }, 600_000);

  it('compares two evaluations per category with intervals, and names a broken endpoint as the reason it ended', async () => {
    expect(workers.running.size, 'the first test left a worker running').toBe(1);
    // A base endpoint (no checkpoint) on two tasks, the policy right on one.
    const base = JSON.parse(
      (
        await rods([
          'eval',
          'run',
          '--campaign',
          campaignId,
          '--endpoint',
          `${standin.url.replace(/\/v1$/, '')}/policy/{category}/v1`,
          '--model',
          'base',
          '--tasks',
          'multi_turn_base_100,multi_turn_base_102',
          '--json',
        ])
      ).stdout,
    ) as { evaluationId: string; status: string; overall: { correct: number; total: number } };
    expect(base.status).toBe('completed');
    expect(base.overall).toMatchObject({ correct: 1, total: 2 });
    const [first] = await evaluationIds(pool, campaignId);
    const cmp = JSON.parse((await rods(['eval', 'compare', first!, base.evaluationId, '--json'])).stdout) as {
      sameTasks: boolean;
      categories: { category: string; a: { correct: number; total: number }; b: { correct: number } }[];
      manifests: unknown;
    };
    expect(cmp.sameTasks).toBe(false);
    expect(cmp.categories.find((c) => c.category === 'base')).toMatchObject({
      a: { correct: 3, total: 4 },
      b: { correct: 1 },
    });
    expect(cmp.manifests).toBeNull();

    // An endpoint nothing listens on: the evaluation ends failed, with the endpoint in the reason.
    const dead = `http://127.0.0.1:${await freePort()}/v1`;
    const r = await rods([
      'eval',
      'run',
      '--campaign',
      campaignId,
      '--endpoint',
      dead,
      '--model',
      'gone',
      '--tasks',
      'multi_turn_base_100',
      '--endpoint-attempts',
      '2',
      '--json',
    ]).catch((e: { code: number; stdout: string }) => e);
    expect((r as { code?: number }).code).toBe(1);
    const failed = JSON.parse(r.stdout) as { status: string; reason: string; scored: number };
    expect(failed.status).toBe('failed');
    expect(failed.reason).toContain(dead);
    expect(failed.scored).toBe(0);
  }, 600_000);
});
