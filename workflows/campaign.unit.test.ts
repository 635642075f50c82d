// The campaign workflow on Temporal's time-skipping test server with mocked activities: the step
// loop, pause and resume, stop, reconfiguration, and a synthesis child that fails. No PostgreSQL,
// Kafka or stack: what the workflow decides is read from the calls it makes to its activities.
import { Context } from '@temporalio/activity';
import { ApplicationFailure } from '@temporalio/common';
import { describe, expect, it } from 'vitest';
import { workflowIds } from '../domain/ids.js';
import type { SelectedSeed, StepPlan } from '../domain/step-plan.js';
import {
  pauseUpdate,
  reconfigureUpdate,
  resumeUpdate,
  statusQuery,
  stopUpdate,
} from '../platform/temporal/campaign-messages.js';
import { useWorkflowEnv } from '../test/support/workflow-env.js';
import { type CampaignInput, campaignWorkflow } from './campaign.js';

const env = useWorkflowEnv();

const CONFIG = { seeds: { perCategory: 2 } };

/** A plan for the step: nothing retired or injected, the given seeds selected. */
function planOf(step: number, selected: SelectedSeed[] = []): StepPlan {
  return {
    step,
    poolVersion: step + 1,
    versionChanged: step === 2,
    boundary: selected.length > 0,
    retired: [],
    selected,
    injected: [],
    pruned: [],
    queueLength: 0,
    activeSize: 8,
    generated: 0,
    inputs: { inFlight: [], runningSyntheses: 0, enqueued: [] },
  };
}

const seed = (taskId: string): SelectedSeed => ({
  taskId,
  category: 'base',
  phi: 0.25,
  quotaSlot: 0,
  stats: {} as SelectedSeed['stats'],
  rootSeedId: taskId,
  depth: 0,
  selectionEventId: `sel-${taskId}`,
  policyVersion: null,
  task: { id: taskId } as unknown as SelectedSeed['task'],
});

/** Mocked activities that record every call; `hold(step)` keeps a step open until released. */
function activities(opts: { select?: (step: number) => SelectedSeed[]; failSynthesis?: boolean } = {}) {
  const calls: { name: string; input: Record<string, unknown> }[] = [];
  const held = new Map<number, { open: Promise<void>; release: () => void }>();
  const record = (name: string, input: unknown) =>
    calls.push({ name, input: input as Record<string, unknown> });
  const mocks = {
    async seedCampaign(input: unknown) {
      record('seedCampaign', input);
      return { poolVersion: 1, seeded: 8 };
    },
    async deliverPoolJsonl(input: unknown) {
      record('deliverPoolJsonl', input);
      return {};
    },
    async awaitStep(input: { step: number }) {
      record('awaitStep', input);
      // Heartbeats as the real one does, so a cancelled wait (pause, stop) reaches it.
      const ctx = Context.current();
      const beat = setInterval(() => ctx.heartbeat(), 500);
      try {
        await Promise.race([held.get(input.step)?.open, ctx.cancelled]);
      } finally {
        clearInterval(beat);
      }
      return { step: input.step };
    },
    async planStep(input: { step: number }) {
      record('planStep', input);
      return planOf(input.step, opts.select?.(input.step) ?? []);
    },
    async recordEvents(input: { events: { type: string }[] }) {
      record('recordEvents', input);
      return { appended: true };
    },
    async settleSynthesis(input: { synthesisId: string; ended: string }) {
      record('settleSynthesis', input);
      return {
        synthesisId: input.synthesisId,
        outcome: 'rejected' as const,
        reasonCode: `child-${input.ended}`,
      };
    },
    async awaitSynthesesEnded(input: unknown) {
      record('awaitSynthesesEnded', input);
      return [];
    },
    // The synthesis child's first step (a local activity): refused, the child fails.
    async synthesisStarted(input: unknown) {
      record('synthesisStarted', input);
      if (opts.failSynthesis) throw ApplicationFailure.nonRetryable('the seed is gone', 'SeedGone');
      return {};
    },
  };
  return {
    mocks,
    calls,
    named: (name: string) => calls.filter((c) => c.name === name).map((c) => c.input),
    events: () =>
      calls
        .filter((c) => c.name === 'recordEvents')
        .flatMap((c) => (c.input.events as { type: string; payload: Record<string, unknown> }[]) ?? []),
    hold(step: number) {
      let release = () => {};
      const open = new Promise<void>((r) => {
        release = r;
      });
      held.set(step, { open, release });
      return release;
    },
  };
}

const start = (taskQueue: string, input: Partial<CampaignInput> & { campaignId: string }) =>
  env().env.client.workflow.start(campaignWorkflow, {
    taskQueue,
    workflowId: workflowIds.campaign(input.campaignId),
    args: [{ config: CONFIG, ...input }],
  });

/** Polls a workflow's status query until `holds` (time does not skip while the test waits). */
async function until<T>(read: () => Promise<T>, holds: (v: T) => boolean): Promise<T> {
  for (let i = 0; i < 400; i++) {
    const v = await read();
    if (holds(v)) return v;
    await new Promise((r) => setTimeout(r, 25));
  }
  throw new Error('condition not reached');
}

describe('campaign workflow (time-skipping test server, mocked activities)', () => {
  it('seeds once, then waits for and plans steps 1..untilStep in order, delivering the pool when its version changes', async () => {
    const a = activities();
    const result = await env().withWorker(a.mocks, async (q) =>
      (await start(q, { campaignId: 'c-steps', untilStep: 3 })).result(),
    );
    expect(result).toMatchObject({ status: 'running', step: 3, seeded: true, poolVersion: 4 });
    expect(a.named('seedCampaign')).toEqual([
      { campaignId: 'c-steps', perCategory: 2, categories: undefined },
    ]);
    expect(a.named('awaitStep').map((i) => i.step)).toEqual([1, 2, 3]);
    expect(a.named('planStep').map((i) => i.step)).toEqual([1, 2, 3]);
    // After seeding (version 1) and after step 2, whose plan changed the version (3).
    expect(a.named('deliverPoolJsonl')).toEqual([
      { campaignId: 'c-steps', version: 1 },
      { campaignId: 'c-steps', version: 3 },
    ]);
    expect(a.calls.map((c) => c.name).filter((n) => n !== 'deliverPoolJsonl')).toEqual([
      'seedCampaign',
      'awaitStep',
      'planStep',
      'awaitStep',
      'planStep',
      'awaitStep',
      'planStep',
    ]);
  }, 60_000);

  it('a run continued as new resumes from its carry: no seeding again, the next step, totals and generation kept', async () => {
    const a = activities();
    const carry = {
      status: 'running' as const,
      step: 7,
      poolVersion: 6,
      seeded: true,
      running: {},
      totals: { selected: 3, validated: 2, rejected: 1, injected: 2, retired: 1, pruned: 0 },
      config: { seeds: { perCategory: 5 } },
      generation: 2,
    };
    const result = await env().withWorker(a.mocks, async (q) =>
      (await start(q, { campaignId: 'c-carry', untilStep: 9, carry })).result(),
    );
    expect(a.named('seedCampaign')).toEqual([]);
    expect(a.named('awaitStep').map((i) => i.step)).toEqual([8, 9]);
    expect(a.named('planStep').map((i) => i.step)).toEqual([8, 9]);
    expect(result).toMatchObject({
      step: 9,
      generation: 2,
      totals: carry.totals,
      config: carry.config,
    });
  }, 60_000);

  it('a pause cancels the wait for the open step and plans nothing until resumed; both recorded', async () => {
    const a = activities();
    const release = a.hold(2);
    const result = await env().withWorker(a.mocks, async (q) => {
      const h = await start(q, { campaignId: 'c-pause', untilStep: 3 });
      await until(
        () => h.query(statusQuery),
        (s) => s.step === 1,
      );
      expect(await h.executeUpdate(pauseUpdate, { args: [{ reason: 'checkpointing' }] })).toMatchObject({
        status: 'paused',
        step: 1,
      });
      release();
      // Paused: step 2 is not planned, however long we wait.
      await env().env.sleep('1 hour');
      expect(a.named('planStep').map((i) => i.step)).toEqual([1]);
      expect((await h.query(statusQuery)).status).toBe('paused');
      expect(await h.executeUpdate(resumeUpdate)).toMatchObject({ status: 'running' });
      return h.result();
    });
    expect(result).toMatchObject({ status: 'running', step: 3 });
    expect(a.named('planStep').map((i) => i.step)).toEqual([1, 2, 3]);
    expect(a.events().map((e) => e.type)).toEqual(['CampaignPaused', 'CampaignResumed']);
    expect(a.events()[0]!.payload).toMatchObject({ campaignId: 'c-pause', reason: 'checkpointing' });
  }, 60_000);

  it('a stop ends the workflow without planning the open step, records CampaignStopped and refuses later updates', async () => {
    const a = activities();
    a.hold(2); // never released: step 2 never closes
    const result = await env().withWorker(a.mocks, async (q) => {
      const h = await start(q, { campaignId: 'c-stop' }); // no untilStep: runs until stopped
      await until(
        () => h.query(statusQuery),
        (s) => s.step === 1,
      );
      await h.executeUpdate(stopUpdate, { args: [{ reason: 'done' }] });
      const r = await h.result();
      await expect(h.executeUpdate(resumeUpdate)).rejects.toThrow();
      return r;
    });
    expect(result).toMatchObject({ status: 'stopped', step: 1 });
    expect(a.named('planStep').map((i) => i.step)).toEqual([1]);
    expect(a.events().map((e) => e.type)).toEqual(['CampaignStopped']);
    expect(a.events()[0]!.payload).toMatchObject({ reason: 'done' });
  }, 60_000);

  it('a reconfiguration takes effect for the next plan and is recorded with its keys; an invalid one is refused and changes nothing', async () => {
    const a = activities();
    const release = a.hold(2);
    await env().withWorker(a.mocks, async (q) => {
      const h = await start(q, { campaignId: 'c-reconf', untilStep: 2 });
      await until(
        () => h.query(statusQuery),
        (s) => s.step === 1,
      );
      // Refused by the update's validator: the cause names the rule.
      const refused = await h
        .executeUpdate(reconfigureUpdate, { args: [{ config: { rolloutsPerTask: 3 } }] })
        .then(
          () => null,
          (e: Error & { cause?: Error }) => e.cause?.message ?? e.message,
        );
      expect(refused).toMatch(/rolloutsPerTask cannot change/);
      const next = { ...CONFIG, selection: { cooldownSteps: 7 } };
      expect((await h.executeUpdate(reconfigureUpdate, { args: [{ config: next }] })).config).toMatchObject({
        selection: { cooldownSteps: 7 },
      });
      release();
      return h.result();
    });
    const plans = a.named('planStep');
    expect(plans[0]!.config).toEqual(CONFIG);
    expect(plans[1]!.config).toMatchObject({ selection: { cooldownSteps: 7 } });
    const events = a.events();
    expect(events.map((e) => e.type)).toEqual(['CampaignReconfigured']);
    expect(events[0]!.payload.changedKeys).toContain('selection.cooldownSteps');
  }, 60_000);

  it('a synthesis child that fails frees its slot through settleSynthesis, counted as rejected, and the campaign goes on', async () => {
    const a = activities({
      select: (step) => (step === 1 ? [seed('multi_turn_base_0')] : []),
      failSynthesis: true,
    });
    const result = await env().withWorker(a.mocks, async (q) =>
      (await start(q, { campaignId: 'c-child', untilStep: 2 })).result(),
    );
    expect(a.named('synthesisStarted')).toHaveLength(1);
    expect(a.named('settleSynthesis')).toEqual([
      expect.objectContaining({ campaignId: 'c-child', seedTaskId: 'multi_turn_base_0', ended: 'failed' }),
    ]);
    expect(a.named('settleSynthesis')[0]!.reason).toMatch(/the seed is gone/);
    expect(result).toMatchObject({
      step: 2,
      running: {},
      totals: { selected: 1, rejected: 1, validated: 0 },
    });
  }, 60_000);
});
