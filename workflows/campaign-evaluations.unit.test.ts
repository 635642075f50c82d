// The campaign workflow's evaluation on checkpoint (config `evaluation`) on Temporal's
// time-skipping test server with mocked activities: what the waiting activity returns is started
// as an evaluation child once (a second start of the same id counts as done, also once it has
// finished), a reconfiguration re-asks with the new settings, the campaign's end looks once more,
// and a campaign without the setting never asks.
import { Context } from '@temporalio/activity';
import proto from '@temporalio/proto';
import { describe, expect, it } from 'vitest';
import { checkpointEvaluationInput, type EvaluationInput } from '../domain/evaluation.js';
import { workflowIds } from '../domain/ids.js';
import { reconfigureUpdate, statusQuery, stopUpdate } from '../platform/temporal/campaign-messages.js';
import { useWorkflowEnv } from '../test/support/workflow-env.js';
import { campaignWorkflow } from './campaign.js';

const { temporal } = proto;

const env = useWorkflowEnv();

const EVALUATION = {
  baseUrl: 'http://serve/{checkpoint}/v1',
  model: 'ckpt-{step}',
  tasks: ['multi_turn_base_100'],
};
const CONFIG = { seeds: { perCategory: 2 }, evaluation: EVALUATION };

const inputFor = (campaignId: string, checkpointId: string, trainerStep: number): EvaluationInput =>
  checkpointEvaluationInput(campaignId, { checkpointId, trainerStep, runId: 'run-1' }, EVALUATION);

/** Blocks, heartbeating, until the activity is cancelled (as the real waits do). */
async function blockUntilCancelled(): Promise<never> {
  const ctx = Context.current();
  const beat = setInterval(() => ctx.heartbeat(), 500);
  try {
    await ctx.cancelled;
  } finally {
    clearInterval(beat);
  }
  throw new Error('unreachable');
}

/**
 * Mocked activities: steps never close; `answers` are what successive waiting calls of the
 * evaluation activity return (then it blocks), `last` what the campaign's final look returns.
 */
function activities(answers: EvaluationInput[][], last: EvaluationInput[] = []) {
  const calls: { name: string; input: Record<string, unknown> }[] = [];
  const record = (name: string, input: unknown) =>
    calls.push({ name, input: input as Record<string, unknown> });
  let waits = 0;
  const mocks = {
    async seedCampaign() {
      return { poolVersion: 1, seeded: 8 };
    },
    async deliverPoolJsonl() {
      return {};
    },
    async awaitStep() {
      return blockUntilCancelled();
    },
    async recordEvents() {
      return { appended: true };
    },
    async awaitCheckpointEvaluations(input: { wait?: boolean }) {
      record('awaitCheckpointEvaluations', input);
      if (input.wait === false) return last;
      const answer = answers[waits++];
      return answer ?? blockUntilCancelled();
    },
    async openEvaluation(input: EvaluationInput) {
      record('openEvaluation', input);
      return { tasks: input.tasks ?? [], scored: [] };
    },
    async scoreEvaluationTask(input: unknown) {
      record('scoreEvaluationTask', input);
      return { valid: true, recorded: false };
    },
    async closeEvaluation(input: { evaluationId: string }) {
      record('closeEvaluation', input);
      return { evaluationId: input.evaluationId, status: 'completed', categories: [], correct: 1, total: 1 };
    },
  };
  return {
    mocks,
    named: (name: string) => calls.filter((c) => c.name === name).map((c) => c.input),
  };
}

/** Polls until `holds` (time does not skip while the test waits). */
async function until(holds: () => boolean | Promise<boolean>): Promise<void> {
  for (let i = 0; i < 400; i++) {
    if (await holds()) return;
    await new Promise((r) => setTimeout(r, 25));
  }
  throw new Error('condition not reached');
}

const start = (taskQueue: string, campaignId: string, config: unknown) =>
  env().env.client.workflow.start(campaignWorkflow, {
    taskQueue,
    workflowId: workflowIds.campaign(campaignId),
    args: [{ campaignId, config }],
  });

describe('campaign workflow: evaluation on checkpoint', () => {
  it('starts each evaluation found once, counts a second start of it as done, and looks once more at its end', async () => {
    const c = 'c-eval';
    const first = inputFor(c, 'run-1-step-4', 4);
    const late = inputFor(c, 'run-1-step-8', 8);
    // The second answer repeats the first (its workflow had not recorded yet): a start refused as a duplicate.
    const a = activities([[first], [first]], [late]);
    const history = await env().withWorker(a.mocks, async (q) => {
      const h = await start(q, c, CONFIG);
      await until(
        () => a.named('closeEvaluation').length === 1 && a.named('awaitCheckpointEvaluations').length >= 3,
      );
      await h.executeUpdate(stopUpdate, { args: [{ reason: 'done' }] });
      await h.result();
      await until(() => a.named('closeEvaluation').length === 2);
      return h.fetchHistory();
    });
    // The settings as configured (the activity fills in each checkpoint), placeholders and all.
    expect(a.named('awaitCheckpointEvaluations')[0]).toMatchObject({
      campaignId: c,
      settings: { ...EVALUATION, onCheckpoint: true, concurrency: 1, endpointAttempts: 5 },
    });
    expect(a.named('awaitCheckpointEvaluations').at(-1)).toMatchObject({ wait: false });
    // Each evaluation ran once, under its derived workflow id, with the checkpoint's names filled in.
    expect(a.named('openEvaluation').map((i) => i.evaluationId)).toEqual([
      first.evaluationId,
      late.evaluationId,
    ]);
    expect(a.named('openEvaluation')[0]).toMatchObject({
      checkpointId: 'run-1-step-4',
      endpoint: { baseUrl: 'http://serve/run-1-step-4/v1', model: 'ckpt-4' },
    });
    const child = await env()
      .env.client.workflow.getHandle(workflowIds.evaluation(first.evaluationId))
      .describe();
    expect(child.status.name).toBe('COMPLETED');
    // Started once; the refused second start failed no workflow task.
    const events = history.events ?? [];
    const initiated = events.filter((e) => e.startChildWorkflowExecutionInitiatedEventAttributes);
    const refused = events.filter((e) => e.startChildWorkflowExecutionFailedEventAttributes);
    const started = events.filter((e) => e.childWorkflowExecutionStartedEventAttributes);
    expect([initiated.length, refused.length, started.length]).toEqual([3, 1, 2]);
    // UNHANDLED_COMMAND is the server refusing a task's commands because new events arrived
    // meanwhile (here an abandoned child's completion landing as the campaign completes); the SDK
    // runs the task again. Under load it happens or not: any other cause is a failure of ours.
    const causes = temporal.api.enums.v1.WorkflowTaskFailedCause as unknown as Record<number, string>;
    const taskFailures = events.filter((e) => {
      const cause = e.workflowTaskFailedEventAttributes?.cause;
      // a number decoded from protobuf, its name once converted from JSON
      const name = typeof cause === 'number' ? causes[cause] : cause;
      return cause != null && name !== 'WORKFLOW_TASK_FAILED_CAUSE_UNHANDLED_COMMAND';
    });
    expect(taskFailures).toEqual([]);
  }, 60_000);

  it('asks again with the new settings after a reconfiguration, stops asking when they are removed, and never asks without them', async () => {
    const a = activities([]);
    await env().withWorker(a.mocks, async (q) => {
      const h = await start(q, 'c-eval-reconf', CONFIG);
      await until(() => a.named('awaitCheckpointEvaluations').length === 1);
      const other = { ...EVALUATION, model: 'other-{checkpoint}' };
      await h.executeUpdate(reconfigureUpdate, { args: [{ config: { ...CONFIG, evaluation: other } }] });
      await until(() => a.named('awaitCheckpointEvaluations').length === 2);
      expect(a.named('awaitCheckpointEvaluations')[1]).toMatchObject({
        settings: { model: 'other-{checkpoint}' },
      });
      await h.executeUpdate(reconfigureUpdate, {
        args: [{ config: { ...CONFIG, evaluation: { ...other, onCheckpoint: false } } }],
      });
      await h.executeUpdate(stopUpdate, { args: [{ reason: 'done' }] });
      await h.result();
    });
    // Off: no further wait, and no final look.
    expect(a.named('awaitCheckpointEvaluations')).toHaveLength(2);

    const none = activities([[inputFor('c-no-eval', 'x', 1)]]);
    await env().withWorker(none.mocks, async (q) => {
      const h = await start(q, 'c-no-eval', { seeds: { perCategory: 2 } });
      await until(async () => (await h.query(statusQuery)).status === 'running');
      await h.executeUpdate(stopUpdate, { args: [{ reason: 'done' }] });
      await h.result();
    });
    expect(none.named('awaitCheckpointEvaluations')).toEqual([]);
  }, 60_000);
});
