// Evaluation overhead: N held-out tasks (--per-category, default 10 of each category) scored by the
// evaluation workflow (`rods eval`: a worker in this process, the stack's executor running
// bfcl-eval's inference and checker, every verdict an event) against the stand-in's known-answer
// policy, vs. the same tasks posted straight to the executor's POST /evaluations/task one after
// the other (bfcl-eval's own work and nothing of rods'). The ratio is rods' share: workflow wall
// time / direct wall time; `overheadShare` = 1 - direct / workflow.
import { randomUUID } from 'node:crypto';
import { bundleWorkflowCode } from '@temporalio/worker';
import { type EvaluationInput, endpointFor } from '../../activities/evaluation.js';
import { ExecutorClient } from '../../activities/executor-client.js';
import { createRodsWorker, WORKFLOWS_PATH } from '../../activities/worker.js';
import { evaluationIdOf, taskListSelection } from '../../domain/evaluation.js';
import { SEED_CATEGORIES } from '../../domain/task.js';
import { registerCampaign } from '../../platform/store/campaigns.js';
import { createPool } from '../../platform/store/db.js';
import { installWorkerRuntime, temporalClient } from '../../platform/temporal/connect.js';
import { freePort } from '../../platform/util/free-port.js';
import { evaluationWorkflow } from '../../workflows/evaluation.js';
import { fetchPolicyTasks, Policy } from '../standin/policy.js';
import { startStandin } from '../standin/server.js';
import type { BenchResult } from './result.js';

export default async function evaluationBench(opts: Record<string, string | boolean>): Promise<BenchResult> {
  const perCategory = Number(opts['per-category'] ?? 10);
  const executor = new ExecutorClient();
  const all = await fetchPolicyTasks((c, limit, offset) => executor.seeds(c, limit, offset));
  const tasks = SEED_CATEGORIES.flatMap((category) =>
    Array.from({ length: perCategory }, (_, i) => ({
      taskId: `multi_turn_${category}_${100 + i}`,
      category,
    })),
  );
  const standin = await startStandin({
    port: await freePort(),
    policy: new Policy({ tasks: all, correctFraction: 0.5, seed: 7 }),
  });
  const baseUrl = `${standin.url.replace(/\/v1$/, '')}/policy/{category}/v1`;
  const pool = createPool({ application: 'rods-bench-evaluation', max: 4 });
  await installWorkerRuntime();
  try {
    // Baseline: the executor's route alone, task after task.
    const d0 = performance.now();
    let directValid = 0;
    for (const t of tasks) {
      const r = await executor.evaluateTask({
        taskId: t.taskId,
        category: t.category as (typeof SEED_CATEGORIES)[number],
        endpoint: { baseUrl: endpointFor(baseUrl, t.category), model: 'bench' },
      });
      if (r.valid) directValid++;
    }
    const directMs = performance.now() - d0;

    // The same tasks through the workflow, a worker in this process.
    const campaignId = `bench-eval-${randomUUID().slice(0, 8)}`;
    await registerCampaign(pool, { campaignId });
    const taskQueue = `bench-eval-${randomUUID().slice(0, 8)}`;
    const workflowBundle = await bundleWorkflowCode({ workflowsPath: WORKFLOWS_PATH });
    const { worker, close } = await createRodsWorker({ pool, taskQueue, workflowBundle });
    const { client, close: closeClient } = await temporalClient();
    const input: EvaluationInput = {
      evaluationId: evaluationIdOf(campaignId, null, 'bench', taskListSelection(tasks)),
      campaignId,
      checkpointId: null,
      endpoint: { baseUrl, model: 'bench' },
      tasks,
    };
    let workflowMs = 0;
    let summary: Awaited<ReturnType<typeof evaluationWorkflow>> | undefined;
    await worker.runUntil(async () => {
      const w0 = performance.now();
      summary = await client.workflow.execute(evaluationWorkflow, {
        taskQueue,
        workflowId: `evaluation-${input.evaluationId}`,
        args: [input],
      });
      workflowMs = performance.now() - w0;
    });
    await closeClient();
    await close();
    if (summary?.status !== 'completed')
      throw new Error(`the evaluation ended ${summary?.status}: ${summary?.reason}`);
    if (summary.correct !== directValid)
      throw new Error(`the workflow found ${summary.correct} valid, the direct run ${directValid}`);
    return {
      tasks: tasks.length,
      valid: summary.correct,
      workflowSecondsPerTask: workflowMs / tasks.length / 1000,
      directSecondsPerTask: directMs / tasks.length / 1000,
      ratio: workflowMs / directMs,
      overheadShare: 1 - directMs / workflowMs,
      baseline: 'the same tasks posted to the executor one after the other (bfcl-eval alone)',
    };
  } finally {
    await standin.close();
    await pool.end();
  }
}
