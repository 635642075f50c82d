import { type ChildProcess, spawn } from 'node:child_process';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ExecutorClient } from '../../activities/executor-client.js';
import { SEED_CATEGORIES, type SeedCategory, type TaskRecord } from '../../domain/task.js';
import { executorPython } from '../../infra/stack/executor.js';
import { paths } from '../../infra/stack/paths.js';
import { freePort } from '../../platform/util/free-port.js';
import { waitUntil } from '../../test/support/wait.js';
import { fetchPolicyTasks, Policy } from './policy.js';
import { type StandinServer, startStandin } from './server.js';

// The known-answer policy scored by bfcl-eval's own multi-turn loop and checker: an executor of
// our own (ephemeral port, the project venv) runs POST /evaluations/task against the stand-in's
// policy; a task is valid exactly when the policy was told to answer it right, so accuracy per
// category is the share of those ids.
const PER_CATEGORY = 6;
const API_KEY = 'sk-policy-int-test-3b9e';
let executor: ChildProcess;
let executorUrl: string;
let log = '';
let tasks: TaskRecord[];
const standins: StandinServer[] = [];

beforeAll(async () => {
  const port = await freePort();
  executorUrl = `http://127.0.0.1:${port}`;
  executor = spawn(executorPython(), ['-m', 'executor', '--host', '127.0.0.1', '--port', String(port)], {
    cwd: paths.root,
    env: { ...process.env, PYTHONDONTWRITEBYTECODE: '1', PYTHONUNBUFFERED: '1' },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  executor.stdout?.on('data', (b: Buffer) => {
    log += b.toString();
  });
  executor.stderr?.on('data', (b: Buffer) => {
    log += b.toString();
  });
  await waitUntil(async () => (await fetch(`${executorUrl}/health`).catch(() => null))?.ok === true, {
    timeoutMs: 60_000,
    what: 'the executor answers /health',
  });
  const client = new ExecutorClient({ url: executorUrl });
  tasks = await fetchPolicyTasks((c, limit, offset) => client.seeds(c, limit, offset));
}, 90_000);

afterAll(async () => {
  for (const s of standins) await s.close();
  executor?.kill('SIGTERM');
});

async function evaluate(baseUrl: string, taskId: string, category: SeedCategory) {
  const r = await fetch(`${executorUrl}/evaluations/task`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ taskId, category, endpoint: { baseUrl, model: 'ckpt-policy', apiKey: API_KEY } }),
  });
  return { status: r.status, body: (await r.json()) as Record<string, unknown> };
}

describe('the known-answer policy under bfcl-eval (POST /evaluations/task)', () => {
  it('is valid exactly for the ids it answers right: accuracy per category is their share', async () => {
    const sample = SEED_CATEGORIES.flatMap((c) =>
      tasks.filter((t) => t.category === c).slice(0, PER_CATEGORY),
    );
    // right: the even positions of each category's sample (3 of 6), and one more in base
    const correct = sample.filter((_, i) => i % 2 === 0 || i === 1).map((t) => t.id);
    const policy = new Policy({ tasks, correct });
    const standin = await startStandin({ port: 0, policy });
    standins.push(standin);
    const root = standin.url.replace(/\/v1$/, '');
    const valid: Record<string, number> = {};
    const started = Date.now();
    for (const t of sample) {
      const { status, body } = await evaluate(`${root}/policy/${t.category}/v1`, t.id, t.category);
      expect(status, JSON.stringify(body)).toBe(200);
      expect(body.valid, `${t.id}: ${body.errorType} ${body.error}`).toBe(policy.isCorrect(t.id));
      if (!body.valid) expect(body.errorType).toBe('multi_turn:empty_turn_model_response');
      else expect(body.toolCalls).toBe(t.ground_truth.flat().length);
      valid[t.category] = (valid[t.category] ?? 0) + (body.valid ? 1 : 0);
    }
    const perTask = (Date.now() - started) / sample.length;
    console.log(`known-answer policy: ${sample.length} tasks, ${perTask.toFixed(0)} ms per task`, valid);
    expect(valid).toEqual({ base: 4, miss_func: 3, miss_param: 3, long_context: 3 });
    expect(standin.stats.policy.answers.calls).toBeGreaterThan(0);
    expect(log).not.toContain(API_KEY);
  }, 300_000);

  it('a failing endpoint is an HTTP error, not a wrong answer', async () => {
    const policy = new Policy({ tasks, correct: [tasks[0]?.id as string] });
    const standin = await startStandin({ port: 0, policy, failRate: 1 });
    standins.push(standin);
    const { status, body } = await evaluate(standin.url, tasks[0]?.id as string, 'base');
    expect(status).toBe(502);
    expect(String(body.error)).toContain(standin.url);
    expect(String(body.error)).toContain('HTTP 503');
    expect(JSON.stringify(body)).not.toContain(API_KEY);
  }, 120_000);
});
