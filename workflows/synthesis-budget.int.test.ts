// The synthesis workflow's repair budget and blocklist, on the real Temporal server with the real
// workflow code and scripted activities (the environment never executes the candidate): at most
// maxConfigRepairs config-patch repairs per candidate across re-plans, and only a function that
// ran and failed is blocklisted for re-planning.
import { randomUUID } from 'node:crypto';
import { fileURLToPath } from 'node:url';
import { Client } from '@temporalio/client';
import { bundleWorkflowCode, Runtime, Worker, type WorkflowBundleWithSourceMap } from '@temporalio/worker';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Failure } from '../activities/executor-client.js';
import type { SynthesisOutcome } from '../domain/campaign-state.js';
import { installWorkerRuntime, temporalNamespace, workerConnection } from '../platform/temporal/connect.js';
import { statsOf } from '../test/support/domain/task-stats.js';
import type { SynthesisInput } from './synthesis.js';

let bundle: WorkflowBundleWithSourceMap;
beforeAll(async () => {
  await installWorkerRuntime('WARN');
  bundle = await bundleWorkflowCode({
    logger: Runtime.instance().logger,
    workflowsPath: fileURLToPath(new URL('./index.ts', import.meta.url)),
  });
}, 180_000);

const closers: (() => Promise<void>)[] = [];
afterAll(async () => {
  for (const c of closers) await c();
});

const task = {
  id: 'multi_turn_base_1',
  category: 'base',
  involved_classes: ['GorillaFileSystem'],
  initial_config: {},
  question: [[{ role: 'user', content: 'list files' }]],
  ground_truth: [['ls()']],
};

/** Runs one synthesis whose every execution fails with `failure`; returns what the activities saw. */
async function synthesize(failure: Failure, maxConfigRepairs: number) {
  const calls = { plans: [] as string[][], patches: 0, executions: 0 };
  const taskQueue = `synthesis-budget-${randomUUID()}`;
  const stage = { model: 'scripted', promptHash: 'p', outputHash: 'o' };
  const activities = {
    synthesisStarted: async () => {},
    stageCompleted: async () => {},
    planTask: async (input: { blocklist: string[] }) => {
      calls.plans.push([...input.blocklist]);
      return { ...stage, value: { narrative: 'n', turns: [] } };
    },
    generateCandidate: async (input: { candidateId: string }) => ({
      ...stage,
      candidate: { ...task, id: input.candidateId },
    }),
    executeCandidate: async () => {
      calls.executions++;
      return { ok: false, failure };
    },
    patchConfig: async (input: { candidate: unknown }) => {
      calls.patches++;
      return { ...stage, candidate: input.candidate };
    },
    recordOutcome: async (input: { kind: string; reasonCode?: string; reason?: string }) => ({
      outcome: input.kind,
      reasonCode: input.reasonCode,
      reason: input.reason,
    }),
  };
  const connection = await workerConnection();
  const worker = await Worker.create({
    connection,
    namespace: temporalNamespace(),
    taskQueue,
    workflowBundle: bundle,
    activities,
  });
  const client = new Client({ connection, namespace: temporalNamespace() });
  const running = worker.run();
  try {
    const input: SynthesisInput = {
      campaignId: 'budget-test',
      synthesisId: `syn-${randomUUID()}`,
      step: 1,
      config: { synthesis: { maxConfigRepairs } },
      parentWorkflowId: `no-parent-${randomUUID()}`,
      seed: {
        taskId: task.id,
        category: 'base',
        phi: 1,
        quotaSlot: 0,
        stats: statsOf(0.5),
        rootSeedId: task.id,
        depth: 0,
        selectionEventId: randomUUID(),
        policyVersion: null,
        task: task as never,
      },
    };
    const outcome: SynthesisOutcome = await client.workflow.execute('synthesisWorkflow', {
      taskQueue,
      workflowId: input.synthesisId,
      args: [input],
    });
    return { outcome, ...calls };
  } finally {
    worker.shutdown();
    await running;
    await connection.close();
  }
}

describe('synthesis repair budget', () => {
  it('spends at most maxConfigRepairs repairs per candidate across re-plans, blocklisting the failing function', async () => {
    const r = await synthesize(
      { turn: 0, index: 0, call: 'ls()', reason: 'ls raised', kind: 'execution' },
      3,
    );
    expect(r.outcome).toMatchObject({ outcome: 'rejected', reasonCode: 'execution-failed' });
    expect(r.patches).toBe(3);
    // 4 plans (maxConfigRepairs + 1), each executed once, plus the 3 repairs' executions
    expect(r.plans).toEqual([[], ['ls'], ['ls'], ['ls']]);
    expect(r.executions).toBe(4 + 3);
  });

  it('blocklists nothing for a call that did not parse or named an unknown function', async () => {
    for (const kind of ['parse', 'unknown-function'] as const) {
      const r = await synthesize({ turn: 0, index: 0, call: 'ls(', reason: 'no parse', kind }, 1);
      expect(r.patches).toBe(1);
      expect(r.plans).toEqual([[], []]);
    }
  });
});
