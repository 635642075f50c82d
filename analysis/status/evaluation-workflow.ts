// Why a running evaluation is not moving, as Temporal sees its workflow: the execution's state,
// each pending activity with its attempt and last failure (an executor or store that is away is
// waited for, without a limit: this is where the wait shows), and whether a worker polls its
// task queue. Never waits on a worker: describe and the task queue are answered by the server.
import { type Client, WorkflowNotFoundError } from '@temporalio/client';
import proto from '@temporalio/proto';
import { workflowIds } from '../../domain/ids.js';
import { bounded, POLLER_FRESH_MS, taskQueuePollers } from './temporal.js';

export interface PendingActivity {
  activity: string;
  /** SCHEDULED, STARTED or CANCEL_REQUESTED. */
  state: string;
  attempt: number;
  /** The last attempt's failure, when one failed. */
  lastFailure: string | null;
}

export interface EvaluationWorkflowView {
  /** RUNNING, COMPLETED, ...; null when Temporal does not know the workflow (or did not answer). */
  status: string | null;
  taskQueue: string | null;
  /** Workers that polled the task queue within the last POLLER_FRESH_MS. */
  workers: number | null;
  pending: PendingActivity[];
  /** What could not be read, or that the workflow is gone (`rods eval run` again resumes it). */
  problem: string | null;
}

const STATE_PREFIX = 'PENDING_ACTIVITY_STATE_';
const { PendingActivityState } = proto.temporal.api.enums.v1;

export async function evaluationWorkflowView(
  client: Client,
  evaluationId: string,
  opts: { timeoutMs: number; now?: number },
): Promise<EvaluationWorkflowView> {
  const view: EvaluationWorkflowView = {
    status: null,
    taskQueue: null,
    workers: null,
    pending: [],
    problem: null,
  };
  const call = <T>(what: string, fn: () => Promise<T>) =>
    bounded(what, opts.timeoutMs, () => client.withDeadline(Date.now() + opts.timeoutMs, fn));
  try {
    const d = await call('describing the evaluation workflow', () =>
      client.workflow.getHandle(workflowIds.evaluation(evaluationId)).describe(),
    );
    view.status = d.status.name;
    view.taskQueue = d.taskQueue;
    view.pending = (d.raw.pendingActivities ?? []).map((a) => ({
      activity: a.activityType?.name ?? '?',
      // The proto enum arrives as a number; protobufjs enums map numbers back to names.
      state: String(
        (PendingActivityState as unknown as Record<number, string>)[Number(a.state ?? 0)] ?? a.state,
      ).replace(STATE_PREFIX, ''),
      attempt: a.attempt ?? 1,
      lastFailure: a.lastFailure?.message ?? null,
    }));
  } catch (e) {
    view.problem =
      e instanceof WorkflowNotFoundError
        ? 'Temporal does not know its workflow (`rods eval run` with the same arguments resumes it)'
        : `Temporal did not describe the workflow: ${(e as Error).message}`;
    return view;
  }
  try {
    const now = opts.now ?? Date.now();
    const pollers = await call('describing the task queue', () =>
      taskQueuePollers(client, view.taskQueue!, now),
    );
    view.workers = pollers.filter(
      (p) => p.lastPollAgoS !== null && p.lastPollAgoS * 1000 <= POLLER_FRESH_MS,
    ).length;
  } catch (e) {
    view.problem = `Temporal did not describe task queue ${view.taskQueue}: ${(e as Error).message}`;
  }
  return view;
}

/** The lines `rods eval show` prints under a running evaluation: what it waits for. */
export function waitingLines(w: EvaluationWorkflowView): string[] {
  const lines: string[] = [];
  if (w.status && w.status !== 'RUNNING') lines.push(`  workflow ${w.status}`);
  if (w.workers === 0)
    lines.push(`  no worker polls task queue ${w.taskQueue}: start \`rods worker\` (it runs the evaluation)`);
  for (const a of w.pending)
    lines.push(
      `  ${a.activity} ${a.state.toLowerCase()}, attempt ${a.attempt}${a.lastFailure ? `: ${a.lastFailure.slice(0, 300)}` : ''}`,
    );
  if (w.problem) lines.push(`  ${w.problem}`);
  return lines;
}
