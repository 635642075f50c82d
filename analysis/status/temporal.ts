// The campaign's workflow as Temporal sees it, without ever waiting on a worker: describe the
// execution (answered by the server), list the pollers of its task queue, and ask the workflow
// itself with a short deadline (3 s when a worker polled recently, 1.5 s to confirm that none
// is there). A completed workflow's result comes from its history, with no worker either.
import { type Client, WorkflowNotFoundError } from '@temporalio/client';
import proto from '@temporalio/proto';
import type { CampaignStatus } from '../../domain/campaign-state.js';
import { workflowIds } from '../../domain/ids.js';
import { statusQuery } from '../../platform/temporal/campaign-messages.js';
import type { ExecutionView, WorkerView } from './report.js';

const { temporal } = proto;

/**
 * A worker's poll is a long poll (about a minute); the server keeps listing a poller for a few
 * minutes after its last one. Seen within this window, a poller counts as present.
 */
export const POLLER_FRESH_MS = 75_000;

export interface WorkflowView {
  execution: ExecutionView | null;
  worker: WorkerView;
  workflow: CampaignStatus | null;
  source: 'workflow' | 'workflow-result' | null;
  errors: Record<string, string>;
}

function timestampMs(t: { seconds?: unknown; nanos?: number | null } | null | undefined): number | null {
  if (!t?.seconds) return null;
  const s = t.seconds as number | { toNumber(): number };
  return (typeof s === 'object' ? s.toNumber() : Number(s)) * 1000 + Math.floor((t.nanos ?? 0) / 1e6);
}

/** Runs `fn` within `ms` or rejects (the call itself is bounded by Temporal's deadline too). */
export async function bounded<T>(what: string, ms: number, fn: () => Promise<T>): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  try {
    return await Promise.race([
      fn(),
      new Promise<never>((_, reject) => {
        timer = setTimeout(() => reject(new Error(`${what}: no answer within ${ms} ms`)), ms);
      }),
    ]);
  } finally {
    clearTimeout(timer);
  }
}

export async function taskQueuePollers(
  client: Client,
  taskQueue: string,
  now: number,
): Promise<WorkerView['pollers']> {
  const r = await client.workflowService.describeTaskQueue({
    namespace: client.options.namespace,
    taskQueue: { name: taskQueue },
    taskQueueType: temporal.api.enums.v1.TaskQueueType.TASK_QUEUE_TYPE_WORKFLOW,
  });
  return (r.pollers ?? []).map((p) => {
    const at = timestampMs(p.lastAccessTime);
    return {
      identity: p.identity ?? '',
      lastPollAgoS: at === null ? null : Math.max(0, Math.round((now - at) / 1000)),
    };
  });
}

export async function workflowView(
  client: Client,
  campaignId: string,
  opts: {
    timeoutMs: number;
    queryTimeoutMs: number;
    /** Bound of the query that confirms no worker is there when none is listed (default 1.5 s). */
    probeTimeoutMs?: number;
    now?: number;
  },
): Promise<WorkflowView> {
  const now = opts.now ?? Date.now();
  const errors: Record<string, string> = {};
  const handle = client.workflow.getHandle(workflowIds.campaign(campaignId));
  const call = <T>(what: string, ms: number, fn: () => Promise<T>) =>
    bounded(what, ms, () => client.withDeadline(Date.now() + ms, fn));
  const worker: WorkerView = {
    present: false,
    taskQueue: null,
    pollers: [],
    answered: false,
    detail: '',
  };
  let execution: ExecutionView | null = null;
  try {
    const d = await call('describing the workflow', opts.timeoutMs, () => handle.describe());
    execution = {
      workflowId: d.workflowId,
      runId: d.runId,
      status: d.status.name,
      taskQueue: d.taskQueue,
      historyLength: d.historyLength,
      startTime: d.startTime?.toISOString() ?? null,
      closeTime: d.closeTime?.toISOString() ?? null,
    };
    worker.taskQueue = d.taskQueue;
  } catch (e) {
    if (e instanceof WorkflowNotFoundError) {
      worker.detail = 'the campaign has no workflow on the Temporal server';
      return { execution: null, worker, workflow: null, source: null, errors };
    }
    errors.temporal = (e as Error).message;
    worker.detail = `Temporal did not describe the workflow: ${(e as Error).message}`;
    return { execution: null, worker, workflow: null, source: null, errors };
  }

  try {
    worker.pollers = await call('describing the task queue', opts.timeoutMs, () =>
      taskQueuePollers(client, execution.taskQueue, now),
    );
  } catch (e) {
    errors.taskQueue = (e as Error).message;
  }
  const fresh = worker.pollers.filter(
    (p) => p.lastPollAgoS !== null && p.lastPollAgoS * 1000 <= POLLER_FRESH_MS,
  );
  worker.present = fresh.length > 0;

  if (execution.status === 'COMPLETED') {
    // The result is in the history: no worker needed.
    try {
      const result = (await call('reading the workflow result', opts.timeoutMs, () =>
        handle.result(),
      )) as CampaignStatus;
      worker.detail = worker.present
        ? `the workflow completed; ${fresh.length} poller(s) on task queue ${execution.taskQueue}`
        : `the workflow completed; no worker polls task queue ${execution.taskQueue} (none needed)`;
      return { execution, worker, workflow: result, source: 'workflow-result', errors };
    } catch (e) {
      errors.workflowResult = (e as Error).message;
    }
  }
  if (execution.status !== 'RUNNING') {
    worker.detail = `the workflow is ${execution.status.toLowerCase()}; no worker will run it again`;
    return { execution, worker, workflow: null, source: null, errors };
  }
  if (!worker.present) {
    // The server lists the pollers of one partition of the queue: a short query confirms.
    try {
      const workflow = await call('the status query', opts.probeTimeoutMs ?? 1500, () =>
        handle.query(statusQuery),
      );
      worker.present = true;
      worker.answered = true;
      worker.detail = `the workflow answered (no recent poller listed on task queue ${execution.taskQueue})`;
      return { execution, worker, workflow, source: 'workflow', errors };
    } catch {
      // No worker: said below.
    }
    const last = worker.pollers
      .map((p) => p.lastPollAgoS)
      .filter((x): x is number => x !== null)
      .sort((a, b) => a - b)[0];
    worker.detail =
      last === undefined
        ? `no worker polls task queue ${execution.taskQueue}`
        : `no worker polls task queue ${execution.taskQueue} (last poll ${last} s ago)`;
    return { execution, worker, workflow: null, source: null, errors };
  }
  try {
    const workflow = await call('the status query', opts.queryTimeoutMs, () => handle.query(statusQuery));
    worker.answered = true;
    worker.detail = `${fresh.length} poller(s) on task queue ${execution.taskQueue}; the workflow answered`;
    return { execution, worker, workflow, source: 'workflow', errors };
  } catch (e) {
    errors.query = (e as Error).message;
    worker.detail = `${fresh.length} poller(s) on task queue ${execution.taskQueue}, but the workflow did not answer its status query: ${(e as Error).message}`;
    return { execution, worker, workflow: null, source: null, errors };
  }
}
