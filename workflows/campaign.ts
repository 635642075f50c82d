// The campaign workflow: one per campaign id, running for weeks. Per training step, once the
// aggregator has closed it, one planning activity retires, selects boundary seeds and injects at
// the cadence (all decisions are the pure pool policy in domain/, recorded as events); the
// selected seeds go to synthesis child workflows, at most `maxConcurrentSyntheses` at a time.
// The workflow itself holds only small state and continues as new when the server suggests it.
import {
  ApplicationFailure,
  allHandlersFinished,
  CancellationScope,
  CancelledFailure,
  ChildWorkflowFailure,
  condition,
  continueAsNew,
  isCancellation,
  ParentClosePolicy,
  patched,
  proxyActivities,
  setHandler,
  startChild,
  TerminatedFailure,
  TimeoutFailure,
  uuid4,
  WorkflowIdReusePolicy,
  workflowInfo,
} from '@temporalio/workflow';
import type { CampaignActivities, SynthesisEnd } from '../activities/campaign.js';
import type { CurriculumActivities } from '../activities/curriculum.js';
import {
  type CampaignConfig,
  operatorOnlyIssues,
  parseCampaignConfig,
  validateReconfiguration,
} from '../domain/campaign-config.js';
import type { CampaignCarry, CampaignStatus, SynthesisOutcome } from '../domain/campaign-state.js';
import type { EvaluationInput } from '../domain/evaluation.js';
import { legacySynthesisId, streams, synthesisId, workflowIds } from '../domain/ids.js';
import type { SelectedSeed } from '../domain/step-plan.js';
import {
  pauseUpdate,
  reconfigureUpdate,
  resumeUpdate,
  statusQuery,
  statusUpdate,
  stopUpdate,
  synthesisFinished,
} from '../platform/temporal/campaign-messages.js';
import { untilDone } from './activity-options.js';
import { evaluationWorkflow } from './evaluation.js';
import { type SynthesisInput, synthesisWorkflow } from './synthesis.js';

export interface CampaignInput {
  campaignId: string;
  config: unknown;
  /** Stop after this step (the demo and tests); runs until stopped when absent. */
  untilStep?: number;
  /** Carried over continue-as-new. */
  carry?: CampaignCarry;
}

const plan = proxyActivities<CurriculumActivities>(untilDone('2 minutes'));
// Planning heartbeats every few seconds: a worker killed mid-plan costs the heartbeat timeout,
// not the 2-minute start-to-close (seen in the soak as a 125 s step).
const planning = proxyActivities<CurriculumActivities>({
  ...untilDone('2 minutes'),
  heartbeatTimeout: '20 seconds',
});
const camp = proxyActivities<CampaignActivities>(untilDone('1 minute'));
const waiting = proxyActivities<CampaignActivities>({
  startToCloseTimeout: '30 days',
  heartbeatTimeout: '10 seconds',
  retry: { initialInterval: '1 second', maximumInterval: '10 seconds' },
});

// Synthesis slots are freed on every child outcome, not only on the child's report (histories
// recorded before this change replay without it).
const SLOTS_FREED = 'synthesis-slots-freed-on-every-outcome';
const PARALLEL_CHILD_STARTS = 'parallel-child-starts';
// Synthesis ids in the injective form (domain/ids.ts); histories recorded before replay the old one.
const INJECTIVE_SYNTHESIS_IDS = 'injective-synthesis-ids';
// A stop recorded as CampaignStopped; children started with an execution timeout.
const STOP_EVENT = 'campaign-stopped-event';
const CHILD_TIMEOUT = 'synthesis-execution-timeout';
// Evaluations started for recorded checkpoints (config `evaluation`); histories recorded before
// never start them.
const EVALUATE_CHECKPOINTS = 'evaluate-checkpoints';

/** How a child that threw ended (its result() rejects with a ChildWorkflowFailure). */
function childEnd(e: unknown): { ended: SynthesisEnd; reason: string } {
  const cause = e instanceof ChildWorkflowFailure ? (e.cause ?? e) : e;
  const ended: SynthesisEnd =
    cause instanceof TerminatedFailure
      ? 'terminated'
      : cause instanceof TimeoutFailure
        ? 'timed-out'
        : cause instanceof CancelledFailure
          ? 'cancelled'
          : 'failed';
  return { ended, reason: cause instanceof Error ? cause.message : String(cause) };
}

export async function campaignWorkflow(input: CampaignInput): Promise<CampaignStatus> {
  const { campaignId } = input;
  const s: CampaignCarry = input.carry ?? {
    status: 'seeding',
    step: 0,
    poolVersion: 0,
    seeded: false,
    running: {},
    totals: { selected: 0, validated: 0, rejected: 0, injected: 0, retired: 0, pruned: 0 },
    config: input.config,
    generation: 0,
  };
  // The parsed config in force (a reconfiguration replaces it; s.config is its raw form).
  const live = { config: parseCampaignConfig(s.config) };
  const status = (): CampaignStatus => ({
    ...s,
    campaignId,
    workflowId: workflowInfo().workflowId,
    historyLength: workflowInfo().historyLength,
  });
  const stopped = () => s.status === 'stopped';
  handleMessages(campaignId, s, live, status);
  const slots = synthesisSlots(campaignId, s);
  let ended = false;
  const evaluations = evaluateCheckpoints(campaignId, live, () => ended);

  if (!s.seeded) {
    const r = await plan.seedCampaign({
      campaignId,
      perCategory: live.config.seeds?.perCategory ?? 100,
      categories: live.config.seeds?.categories,
    });
    s.seeded = true;
    s.poolVersion = r.poolVersion;
    if (s.status === 'seeding') s.status = 'running';
    await camp.deliverPoolJsonl({ campaignId, version: r.poolVersion });
  }

  while (s.status !== 'stopped' && (input.untilStep === undefined || s.step < input.untilStep)) {
    if (workflowInfo().continueAsNewSuggested) {
      // Only once every update and signal handler has finished, carrying the whole state.
      await condition(allHandlersFinished);
      s.generation++;
      await continueAsNew<typeof campaignWorkflow>({ ...input, config: s.config, carry: s });
    }
    await condition(() => s.status !== 'paused');
    // (a function, as s.status changes while the workflow waits)
    if (stopped()) break;
    const next = s.step + 1;

    // Wait until the aggregator closed the step; a pause or stop cancels the wait.
    const interrupted = await waitForStep(campaignId, next, () => s.status !== 'running');
    if (interrupted) continue;

    const p = await planning.planStep({
      campaignId,
      step: next,
      config: s.config,
      inFlight: Object.values(s.running),
      runningSyntheses: Object.keys(s.running).length,
    });
    await startSyntheses(campaignId, next, s, live.config, p.selected, slots);
    s.poolVersion = p.poolVersion;
    s.totals.selected += p.selected.length;
    s.totals.injected += p.injected.length;
    s.totals.retired += p.retired.length;
    s.totals.pruned += p.pruned.length;
    s.lastPlan = { ...p, selected: p.selected.map((x) => x.taskId) };
    s.step = next;
    if (p.versionChanged) await camp.deliverPoolJsonl({ campaignId, version: p.poolVersion });
  }
  // Let the running syntheses finish and report (their outcomes are decisions of this campaign).
  await condition(() => Object.keys(s.running).length === 0);
  ended = true;
  await evaluations;
  await condition(allHandlersFinished);
  return status();
}

/**
 * The campaign's messages: the status query and update, and pause, resume, stop and
 * reconfigure, each recorded as a lifecycle event (workflow time and uuid4 are deterministic on
 * replay).
 */
function handleMessages(
  campaignId: string,
  s: CampaignCarry,
  live: { config: CampaignConfig },
  status: () => CampaignStatus,
): void {
  const lifecycle = (
    type: 'CampaignPaused' | 'CampaignResumed' | 'CampaignStopped' | 'CampaignReconfigured',
    payload: Record<string, unknown>,
  ) =>
    camp.recordEvents({
      streamId: streams.campaign(campaignId),
      events: [
        {
          eventId: uuid4(),
          type,
          payload: { campaignId, actor: null, occurredAt: Date.now(), ...payload },
        },
      ],
    });
  setHandler(statusQuery, status);
  setHandler(statusUpdate, status);
  setHandler(
    pauseUpdate,
    async (req) => {
      if (s.status === 'running' || s.status === 'seeding') {
        s.status = 'paused';
        await lifecycle('CampaignPaused', { reason: req?.reason ?? null });
      }
      return status();
    },
    {
      validator: (_req) => {
        if (s.status === 'stopped') throw new Error('the campaign is stopped; it cannot be paused');
      },
    },
  );
  setHandler(
    resumeUpdate,
    async () => {
      if (s.status === 'paused') {
        s.status = s.seeded ? 'running' : 'seeding';
        await lifecycle('CampaignResumed', { reason: null });
      }
      return status();
    },
    {
      validator: () => {
        if (s.status === 'stopped')
          throw new Error('the campaign is stopped; start a new one instead of resuming');
      },
    },
  );
  setHandler(stopUpdate, async (req) => {
    if (s.status !== 'stopped') {
      s.status = 'stopped';
      if (patched(STOP_EVENT)) await lifecycle('CampaignStopped', { reason: req?.reason ?? null });
    }
    return status();
  });
  setHandler(
    reconfigureUpdate,
    async ({ config: next }) => {
      const r = validateReconfiguration(live.config, next);
      if (!r.ok) throw ApplicationFailure.nonRetryable(r.message);
      live.config = r.config;
      s.config = r.raw;
      await lifecycle('CampaignReconfigured', {
        config: JSON.stringify(r.raw),
        changedKeys: r.changedKeys,
        reason: null,
      });
      return status();
    },
    {
      validator: ({ config: next }) => {
        if (s.status === 'stopped') throw new Error('the campaign is stopped; it cannot be reconfigured');
        // Only in the validator (never run on replay): histories that took such a config still replay.
        const secret = operatorOnlyIssues(next);
        if (secret.length) throw new Error(secret.map((i) => i.message).join('; '));
        const r = validateReconfiguration(live.config, next);
        if (!r.ok) throw new Error(r.message);
      },
    },
  );
}

interface SynthesisSlots {
  /** Frees the child's slot whatever way its run ends. */
  onChildEnd(child: SynthesisInput, result: Promise<SynthesisOutcome>): void;
  /** A child with no handle in this run: watched until its workflow has ended. */
  adopt(synthesisId: string): void;
}

/**
 * The synthesis slots (s.running): a slot is freed once, by whichever report of its run comes
 * first, the child's signal or its result. Entries without a child handle in this run (children
 * of an earlier run carried across continue-as-new, or a start refused because the id is in
 * use) are watched by one activity at a time, which frees each slot when its workflow has ended.
 */
function synthesisSlots(campaignId: string, s: CampaignCarry): SynthesisSlots {
  const settle = (o: SynthesisOutcome) => {
    if (!(o.synthesisId in s.running)) return;
    delete s.running[o.synthesisId];
    if (o.outcome === 'validated') s.totals.validated++;
    else s.totals.rejected++;
  };
  setHandler(synthesisFinished, settle);

  // A child reports by signal only at its very end; one that fails early or is terminated never does.
  const onChildEnd = (child: SynthesisInput, result: Promise<SynthesisOutcome>) => {
    const id = child.synthesisId;
    result
      .then(
        (o) => {
          if (id in s.running && patched(SLOTS_FREED)) settle(o);
        },
        async (e) => {
          if (!(id in s.running) || !patched(SLOTS_FREED)) return;
          const end = childEnd(e);
          settle(
            await camp.settleSynthesis({
              campaignId,
              synthesisId: id,
              seedTaskId: child.seed.taskId,
              ...end,
            }),
          );
        },
      )
      .catch(() => {
        // Only a cancelled activity lands here; the entry stays for the next run's watcher.
      });
  };
  const orphans = new Set(Object.keys(s.running));
  let watching = false;
  const watchOrphans = () => {
    if (watching || orphans.size === 0 || !patched(SLOTS_FREED)) return;
    watching = true;
    void (async () => {
      for (;;) {
        for (const id of orphans) if (!(id in s.running)) orphans.delete(id);
        if (orphans.size === 0) break;
        const ended = await waiting.awaitSynthesesEnded({
          campaignId,
          syntheses: Object.fromEntries([...orphans].map((id) => [id, s.running[id]!])),
        });
        for (const o of ended) {
          orphans.delete(o.synthesisId);
          settle(o);
        }
      }
    })()
      .catch(() => {})
      .finally(() => {
        watching = false;
      });
  };
  watchOrphans();
  return {
    onChildEnd,
    adopt: (synthesisId) => {
      orphans.add(synthesisId);
      watchOrphans();
    },
  };
}

/**
 * One synthesis child per selected seed. The children are registered before they start (a fast
 * child may report back at once), and the caller publishes the new step only once they are
 * started, so a status reader never sees step S without its syntheses.
 */
async function startSyntheses(
  campaignId: string,
  step: number,
  s: CampaignCarry,
  config: CampaignConfig,
  selected: readonly SelectedSeed[],
  slots: SynthesisSlots,
): Promise<void> {
  const children: SynthesisInput[] = selected.map((seed) => ({
    campaignId,
    synthesisId: (patched(INJECTIVE_SYNTHESIS_IDS) ? synthesisId : legacySynthesisId)(
      campaignId,
      step,
      seed.taskId,
    ),
    step,
    seed,
    config: s.config,
    parentWorkflowId: workflowInfo().workflowId,
  }));
  for (const child of children) s.running[child.synthesisId] = child.seed.taskId;
  const startOne = async (child: SynthesisInput) => {
    // Children outlive a continue-as-new of the parent and report back by signal.
    try {
      const handle = await startChild(synthesisWorkflow, {
        workflowId: workflowIds.synthesis(child.synthesisId),
        args: [child],
        parentClosePolicy: ParentClosePolicy.ABANDON,
        ...(patched(CHILD_TIMEOUT)
          ? { workflowExecutionTimeout: `${config.synthesis.executionTimeoutSeconds} seconds` }
          : {}),
      });
      slots.onChildEnd(child, handle.result());
    } catch (e) {
      if (!patched(SLOTS_FREED)) throw e;
      slots.adopt(child.synthesisId);
    }
  };
  // All of a step's children start in one workflow task; one after the other, each start
  // waited a server round trip, and the last of 12 started seconds after the first.
  if (patched(PARALLEL_CHILD_STARTS)) await Promise.all(children.map(startOne));
  else for (const child of children) await startOne(child);
}

/** Runs the awaitStep activity, cancelled when `stop()` turns true. Returns true when interrupted. */
async function waitForStep(campaignId: string, step: number, stop: () => boolean): Promise<boolean> {
  return (await unlessStopped(() => waiting.awaitStep({ campaignId, step }), stop)) === undefined;
}

/** Runs a waiting activity, cancelled when `stop()` turns true: its result, or undefined when stopped first. */
async function unlessStopped<T>(
  run: () => Promise<T>,
  stop: () => boolean,
): Promise<{ value: T } | undefined> {
  const waitScope = new CancellationScope();
  const waitP = waitScope.run(run);
  const watchScope = new CancellationScope();
  const watchP = watchScope.run(() => condition(stop));
  try {
    const winner = await Promise.race([
      waitP.then((value) => ({ value })),
      watchP.then(() => 'stop' as const),
    ]);
    if (winner !== 'stop') return winner;
    waitScope.cancel();
    await waitP.catch((e) => {
      if (!isCancellation(e)) throw e;
    });
    return undefined;
  } finally {
    watchScope.cancel();
    watchP.catch(() => {});
  }
}

/**
 * While the config's evaluation.onCheckpoint is on, starts the evaluation of every checkpoint the
 * campaign records (one activity waits for them, cancelled and asked again when a reconfiguration
 * changes the settings), then, once the campaign has ended, looks once more. The evaluations are
 * children of this workflow, not started by the activity: workflows are started by reference,
 * and an activity may not import workflow code. A start is a command in this history, so a worker
 * killed anywhere replays it rather than losing or repeating it; the derived workflow id makes a
 * second start (a later run, `rods eval run`) find the first.
 */
async function evaluateCheckpoints(
  campaignId: string,
  live: { config: CampaignConfig },
  ended: () => boolean,
): Promise<void> {
  const settings = () => (live.config.evaluation?.onCheckpoint ? live.config.evaluation : undefined);
  await condition(() => ended() || settings() !== undefined);
  if (settings() === undefined || !patched(EVALUATE_CHECKPOINTS)) return;
  while (!ended()) {
    const config = live.config;
    const now = settings();
    if (!now) {
      await condition(() => ended() || settings() !== undefined);
      continue;
    }
    const found = await unlessStopped(
      () => waiting.awaitCheckpointEvaluations({ campaignId, settings: now }),
      () => ended() || live.config !== config,
    );
    if (found) await Promise.all(found.value.map(startEvaluation));
  }
  const last = settings();
  if (last)
    await Promise.all(
      (await camp.awaitCheckpointEvaluations({ campaignId, settings: last, wait: false })).map(
        startEvaluation,
      ),
    );
}

/** Starts an evaluation (abandoned: it outlives this run); one that exists already, running or finished, counts as started. */
async function startEvaluation(input: EvaluationInput): Promise<void> {
  try {
    const child = await startChild(evaluationWorkflow, {
      workflowId: workflowIds.evaluation(input.evaluationId),
      args: [input],
      parentClosePolicy: ParentClosePolicy.ABANDON,
      // A finished evaluation is never run again from here.
      workflowIdReusePolicy: WorkflowIdReusePolicy.REJECT_DUPLICATE,
    });
    // Its outcome is in its own stream; an evaluation that fails must not fail the campaign.
    child.result().catch(() => {});
  } catch (e) {
    // (by name: @temporalio/workflow does not export the class, and the package that does is not ours)
    if ((e as Error)?.name !== 'WorkflowExecutionAlreadyStartedError') throw e;
  }
}
