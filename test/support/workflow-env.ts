// Workflow tests in seconds: the rods workflows, bundled once per test file, run on Temporal's
// time-skipping test server (infra/stack/temporal-test-server.ts) with activities the test
// provides. Timers and activity waits skip ahead: a step loop that would wait on the aggregator
// for minutes runs as fast as the mocks answer.
import { fileURLToPath } from 'node:url';
import { TestWorkflowEnvironment } from '@temporalio/testing';
import { bundleWorkflowCode, Runtime, Worker, type WorkflowBundleWithSourceMap } from '@temporalio/worker';
import { afterAll, beforeAll } from 'vitest';
import { ensureTemporalTestServer } from '../../infra/stack/temporal-test-server.js';
// The SDK's log to .stack/logs/tests/, printed for a failing test (in the unit tier too).
import './temporal-log.js';

export const WORKFLOWS = fileURLToPath(new URL('../../workflows/index.ts', import.meta.url));

export interface WorkflowEnv {
  env: TestWorkflowEnvironment;
  /** Runs `body` with a worker on a fresh task queue that serves the given activities. */
  withWorker<T>(activities: object, body: (taskQueue: string) => Promise<T>): Promise<T>;
  teardown(): Promise<void>;
}

let bundle: WorkflowBundleWithSourceMap | undefined;
let queues = 0;

/**
 * The environment for a test file: started before its tests, torn down after them. Use
 * `env()` inside tests (it throws if the start failed).
 */
export function useWorkflowEnv(): () => WorkflowEnv {
  let wf: WorkflowEnv | undefined;
  beforeAll(async () => {
    wf = await workflowEnv();
  }, 120_000);
  afterAll(async () => {
    await wf?.teardown();
  });
  return () => {
    if (!wf) throw new Error('the workflow test environment did not start (see beforeAll)');
    return wf;
  };
}

/**
 * The time-skipping server, started up to three times: the native bridge gives it a fixed 5 s to
 * answer (sdk-core crates/sdk-core/src/ephemeral_server/mod.rs:343), and its JVM can take longer
 * on a 2-core machine while the full suite runs end-to-end tests beside it.
 */
async function startTimeSkipping(path: string): Promise<TestWorkflowEnvironment> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await TestWorkflowEnvironment.createTimeSkipping({
        server: { executable: { type: 'existing-path', path } },
      });
    } catch (e) {
      if (attempt >= 3 || !/did not start within/.test(String((e as Error)?.message ?? e))) throw e;
    }
  }
}

export async function workflowEnv(): Promise<WorkflowEnv> {
  const path = await ensureTemporalTestServer();
  const env = await startTimeSkipping(path);
  bundle ??= await bundleWorkflowCode({ workflowsPath: WORKFLOWS, logger: Runtime.instance().logger });
  return {
    env,
    async withWorker(activities, body) {
      const taskQueue = `wf-test-${process.pid}-${++queues}`;
      const worker = await Worker.create({
        connection: env.nativeConnection,
        namespace: env.namespace ?? 'default',
        taskQueue,
        workflowBundle: bundle!,
        activities,
      });
      return worker.runUntil(body(taskQueue));
    },
    teardown: () => env.teardown(),
  };
}
