// The evaluation of a checkpoint: open it, score every task not scored yet (a few at a time),
// then record accuracy per category, or the reason it could not finish. All I/O is in
// activities/evaluation.ts; a task's verdict is recorded once, so a worker killed mid-evaluation
// resumes with the tasks left.
import { ActivityFailure, ApplicationFailure, proxyActivities } from '@temporalio/workflow';
import type { EvaluationActivities, EvaluationInput, EvaluationSummary } from '../activities/evaluation.js';
import { UNTIL_DONE } from './activity-options.js';

const { openEvaluation, closeEvaluation, failEvaluation } = proxyActivities<EvaluationActivities>({
  startToCloseTimeout: '2 minutes',
  retry: UNTIL_DONE,
});

// One task's multi-turn inference against a slow endpoint can take minutes; the heartbeat (every
// 5 s) lets a task whose worker died be retried within 30 s instead.
const { scoreEvaluationTask } = proxyActivities<EvaluationActivities>({
  startToCloseTimeout: '30 minutes',
  heartbeatTimeout: '30 seconds',
  retry: UNTIL_DONE,
});

/** The message of a failed activity's cause (an endpoint that kept failing, an unknown task). */
function reasonOf(e: unknown): string {
  const cause = e instanceof ActivityFailure ? e.cause : e;
  if (cause instanceof ApplicationFailure) return cause.message;
  return (cause as Error)?.message ?? String(cause);
}

export async function evaluationWorkflow(input: EvaluationInput): Promise<EvaluationSummary> {
  let opened: Awaited<ReturnType<typeof openEvaluation>>;
  try {
    opened = await openEvaluation(input);
  } catch (e) {
    return failEvaluation({
      evaluationId: input.evaluationId,
      campaignId: input.campaignId,
      reason: reasonOf(e),
    });
  }
  const done = new Set(opened.scored);
  const todo = opened.tasks.filter((t) => !done.has(t.taskId));
  let failure: string | undefined;
  let next = 0;
  const lane = async () => {
    while (failure === undefined && next < todo.length) {
      const task = todo[next++]!;
      try {
        await scoreEvaluationTask({
          evaluationId: input.evaluationId,
          campaignId: input.campaignId,
          task,
          endpoint: input.endpoint,
          ...(input.maxStepsPerTurn !== undefined ? { maxStepsPerTurn: input.maxStepsPerTurn } : {}),
          ...(input.endpointAttempts !== undefined ? { endpointAttempts: input.endpointAttempts } : {}),
        });
      } catch (e) {
        failure ??= reasonOf(e);
      }
    }
  };
  const lanes = Math.max(1, Math.min(input.concurrency ?? 1, todo.length));
  await Promise.all(Array.from({ length: lanes }, lane));
  if (failure !== undefined)
    return failEvaluation({
      evaluationId: input.evaluationId,
      campaignId: input.campaignId,
      reason: failure,
    });
  return closeEvaluation({ evaluationId: input.evaluationId, campaignId: input.campaignId });
}
