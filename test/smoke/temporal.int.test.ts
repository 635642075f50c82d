import { randomUUID } from 'node:crypto';
import { bundleWorkflowCode, Runtime, Worker, type WorkflowBundleWithSourceMap } from '@temporalio/worker';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  installWorkerRuntime,
  temporalClient,
  temporalNamespace,
  workerConnection,
} from '../../platform/temporal/connect.js';
import * as activities from './activities.js';

let bundle: WorkflowBundleWithSourceMap;
let client: Awaited<ReturnType<typeof temporalClient>>;

beforeAll(async () => {
  await installWorkerRuntime('WARN');
  bundle = await bundleWorkflowCode({
    workflowsPath: new URL('./workflows.ts', import.meta.url).pathname,
    logger: Runtime.instance().logger,
  });
  client = await temporalClient();
});

afterAll(async () => {
  await client?.close();
});

async function startWorker(taskQueue: string) {
  const connection = await workerConnection();
  const worker = await Worker.create({
    connection,
    namespace: temporalNamespace(),
    taskQueue,
    workflowBundle: bundle,
    activities,
  });
  const running = worker.run();
  return {
    worker,
    async stop() {
      worker.shutdown();
      await running;
      await connection.close();
    },
  };
}

describe('Temporal smoke', () => {
  it('a worker runs a workflow that calls an activity and the client gets the result', async () => {
    const taskQueue = `smoke-${randomUUID()}`;
    const w = await startWorker(taskQueue);
    try {
      const result = await client.client.workflow.execute('greet', {
        taskQueue,
        workflowId: `greet-${randomUUID()}`,
        args: ['rods'],
      });
      expect(result).toBe(`hello rods (pid ${process.pid})`);
      expect(activities.calls).toContain('hello rods');
    } finally {
      await w.stop();
    }
  });

  it('a workflow survives a worker restart in the middle and completes on the new worker', async () => {
    const taskQueue = `smoke-restart-${randomUUID()}`;
    const workflowId = `two-step-${randomUUID()}`;
    const first = await startWorker(taskQueue);
    const handle = await client.client.workflow.start('twoStep', { taskQueue, workflowId, args: ['r'] });
    // Wait until the first activity has completed in history, then take the worker away.
    await expect
      .poll(
        async () => {
          const h = await handle.fetchHistory();
          return (h.events ?? []).some((e) => e.activityTaskCompletedEventAttributes);
        },
        { timeout: 30_000, interval: 200 },
      )
      .toBe(true);
    await first.stop();
    const before = activities.calls.filter((c) => c.startsWith('r:')).length;

    // A fresh worker (new connection, empty workflow cache) picks the workflow up from history.
    const second = await startWorker(taskQueue);
    try {
      await handle.signal('proceed');
      const result = await handle.result();
      expect(result).toHaveLength(2);
      // The first activity ran once, before the restart; replay did not run it again.
      expect(activities.calls.filter((c) => c === 'r:first')).toHaveLength(1);
      expect(activities.calls.filter((c) => c === 'r:second')).toHaveLength(1);
      expect(before).toBe(1);
      const desc = await handle.describe();
      expect(desc.status.name).toBe('COMPLETED');
    } finally {
      await second.stop();
    }
  });
});
