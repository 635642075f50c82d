import { describe, expect, it } from 'vitest';
import { waitingLines } from './evaluation-workflow.js';

describe('what a running evaluation waits for', () => {
  it('names a missing worker, each pending activity with its attempt and last failure, and a problem', () => {
    const lines = waitingLines({
      status: 'RUNNING',
      taskQueue: 'rods',
      workers: 0,
      pending: [
        {
          activity: 'scoreEvaluationTask',
          state: 'SCHEDULED',
          attempt: 7,
          lastFailure: 'the executor at http://127.0.0.1:8090 is unreachable: ECONNREFUSED',
        },
        { activity: 'scoreEvaluationTask', state: 'STARTED', attempt: 1, lastFailure: null },
      ],
      problem: null,
    });
    expect(lines).toEqual([
      '  no worker polls task queue rods: start `rods worker` (it runs the evaluation)',
      '  scoreEvaluationTask scheduled, attempt 7: the executor at http://127.0.0.1:8090 is unreachable: ECONNREFUSED',
      '  scoreEvaluationTask started, attempt 1',
    ]);
  });

  it('says nothing of a workflow that runs with a worker and nothing pending, and names a gone one', () => {
    expect(
      waitingLines({ status: 'RUNNING', taskQueue: 'q', workers: 1, pending: [], problem: null }),
    ).toEqual([]);
    expect(
      waitingLines({
        status: null,
        taskQueue: null,
        workers: null,
        pending: [],
        problem: 'Temporal does not know it',
      }),
    ).toEqual(['  Temporal does not know it']);
    expect(
      waitingLines({ status: 'TERMINATED', taskQueue: 'q', workers: 1, pending: [], problem: null }),
    ).toEqual(['  workflow TERMINATED']);
  });
});
