import { randomUUID } from 'node:crypto';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ExecutorClient } from '../activities/executor-client.js';
import { fetchPolicyTasks, Policy } from '../dev/standin/policy.js';
import { type StandinServer, startStandin } from '../dev/standin/server.js';
import { streams, workflowIds } from '../domain/ids.js';
import { createPool } from '../platform/store/db.js';
import { evaluationIds, evaluationView } from '../platform/store/events/evaluations.js';
import { readStreamOf } from '../platform/store/events/event-store.js';
import { temporalClient } from '../platform/temporal/connect.js';
import { freePort } from '../platform/util/free-port.js';
import { recordTestCheckpoint } from '../test/support/checkpoints/recorded.js';
import { waitUntil } from '../test/support/wait.js';
import { workerProcesses } from '../test/support/worker-process.js';

const pool = createPool({ application: 'rods-eval-on-checkpoint-e2e', max: 4 });
const TASK_QUEUE = `eval-ckpt-e2e-${randomUUID().slice(0, 8)}`;
const campaignId = `eval-ckpt-e2e-${randomUUID().slice(0, 8)}`;
const CHECKPOINT = 'run-1-step-4';
const TASKS = [
  'multi_turn_base_100',
  'multi_turn_base_101',
  'multi_turn_miss_func_100',
  'multi_turn_miss_func_102',
];
const RIGHT = ['multi_turn_base_100', 'multi_turn_miss_func_102'];

let standin: StandinServer;
let policyUrl: string;

const workers = workerProcesses(TASK_QUEUE);
const { rods, kill9 } = workers;
const startWorker = () => workers.start();

beforeAll(async () => {
  const executor = new ExecutorClient();
  const tasks = await fetchPolicyTasks((c, limit, offset) => executor.seeds(c, limit, offset));
  standin = await startStandin({ port: await freePort(), policy: new Policy({ tasks, correct: RIGHT }) });
  policyUrl = `${standin.url.replace(/\/v1$/, '')}/policy/{category}/v1`;
}, 120_000);

afterAll(async () => {
  await workers.killAll();
  const { client, close } = await temporalClient();
  await client.workflow
    .getHandle(workflowIds.campaign(campaignId))
    .terminate('test done')
    .catch(() => {});
  await close();
  await standin?.close();
  await pool.end();
});

describe('evaluation on checkpoint', () => {
  it('starts the evaluation of a recorded checkpoint once through a worker killed right after, and `rods eval run` finds it', async () => {
    const dir = mkdtempSync(path.join(tmpdir(), 'rods-eval-ckpt-'));
    const configFile = path.join(dir, 'campaign.json');
    writeFileSync(
      configFile,
      JSON.stringify({
        seeds: { perCategory: 2 },
        evaluation: { onCheckpoint: true, baseUrl: policyUrl, model: 'ckpt-{step}', tasks: TASKS },
      }),
    );
    let worker = startWorker();
    await rods(['campaign', 'start', '--config', configFile, '--id', campaignId, '--json']);
    // The campaign is seeded: its workflow is past its first activity and waits for step 1.
    await waitUntil(
      async () => (await readStreamOf(pool, streams.campaign(campaignId), ['TaskSeeded'])).length > 0,
      { timeoutMs: 120_000, what: 'the campaign to be seeded' },
    );

    await recordTestCheckpoint(pool, campaignId, {
      checkpointId: CHECKPOINT,
      trainerStep: 4,
      manifestRoot: 'ab'.repeat(32),
    });
    await kill9(worker);
    worker = startWorker();

    await waitUntil(async () => (await evaluationIds(pool, campaignId)).length > 0, {
      timeoutMs: 180_000,
      what: 'the evaluation to start',
    });
    const [id, ...more] = await evaluationIds(pool, campaignId);
    expect(more).toEqual([]);
    await waitUntil(async () => (await evaluationView(pool, id!))?.status === 'completed', {
      timeoutMs: 300_000,
      what: 'the evaluation to complete',
    });
    const v = (await evaluationView(pool, id!))!;
    expect(v).toMatchObject({
      checkpointId: CHECKPOINT,
      trainerStep: 4,
      manifestRoot: 'ab'.repeat(32),
      model: 'ckpt-4',
      endpoint: policyUrl,
      correct: 2,
      total: 4,
      scored: 4,
      tasks: 4,
    });
    for (const o of v.outcomes) expect(o.valid, o.taskId).toBe(RIGHT.includes(o.taskId));

    // Started once: one child started by the campaign, one EvaluationStarted, each task scored once.
    const { client, close } = await temporalClient();
    try {
      const history = await client.workflow.getHandle(workflowIds.campaign(campaignId)).fetchHistory();
      const children = (history.events ?? []).filter(
        (e) =>
          e.childWorkflowExecutionStartedEventAttributes?.workflowExecution?.workflowId ===
          workflowIds.evaluation(id!),
      );
      expect(children).toHaveLength(1);
      const child = await client.workflow.getHandle(workflowIds.evaluation(id!)).describe();
      expect(child.status.name).toBe('COMPLETED');
    } finally {
      await close();
    }
    const stream = streams.evaluation(id!);
    expect(await readStreamOf(pool, stream, ['EvaluationStarted'])).toHaveLength(1);
    const scored = await readStreamOf(pool, stream, ['EvaluationTaskScored']);
    expect(scored.map((e) => e.payload.taskId).sort()).toEqual([...TASKS].sort());
    const asked = { ...standin.stats.policy.tasks };

    // `rods eval run` of the same checkpoint, model and tasks is the same evaluation: nothing scored again.
    const again = JSON.parse(
      (
        await rods([
          'eval',
          'run',
          '--campaign',
          campaignId,
          '--checkpoint',
          CHECKPOINT,
          '--endpoint',
          policyUrl,
          '--model',
          'ckpt-4',
          '--tasks',
          TASKS.join(','),
          '--json',
        ])
      ).stdout,
    ) as { evaluationId: string; status: string; overall: { correct: number; total: number } };
    expect(again).toMatchObject({ evaluationId: id, status: 'completed', overall: { correct: 2, total: 4 } });
    expect(await evaluationIds(pool, campaignId)).toEqual([id]);
    expect(await readStreamOf(pool, stream, ['EvaluationTaskScored'])).toHaveLength(4);
    expect(standin.stats.policy.tasks).toEqual(asked);
  }, 600_000);
});
