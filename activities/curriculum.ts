// The curriculum step: seeding a campaign's pool and planning each training step with the pure
// step decider (planStep, domain/step-plan.ts). The pool state is kept beside the events in
// PostgreSQL (campaign_plans): one transaction loads it, decides (decideStep, domain/step-events.ts), appends the
// decisions as events, updates the projections and stores the new state with the plan. A retried
// activity finds its plan recorded and returns it instead of deciding again, so every decision
// happens once.
import { Context } from '@temporalio/activity';
import type pg from 'pg';
import type { CampaignConfig } from '../domain/campaign-config.js';
import { eventIds, streams } from '../domain/ids.js';
import { applyDecisions } from '../domain/pool/evolve.js';
import { type RejectionStreak, seedTasks } from '../domain/pool/policy.js';
import { EMPTY_POOL, type PoolState } from '../domain/pool/state.js';
import { type DecisionEvent, decideStep, rejectionStreaksOf, seedEvents } from '../domain/step-events.js';
import type { SelectedSeed, StepPlan } from '../domain/step-plan.js';
import type { SeedCategory, TaskRecord } from '../domain/task.js';
import { SEED_CATEGORIES } from '../domain/task.js';
import { campaignConfigOf } from '../platform/config/campaign-config.js';
import { insertPlan, latestPlanState, recordedPlan } from '../platform/store/campaign-plans.js';
import { inTransaction } from '../platform/store/db.js';
import type { NewEvent } from '../platform/store/events/event-store.js';
import { lockForTransaction } from '../platform/store/locks.js';
import { validatedCandidates } from '../platform/store/pool/candidates.js';
import { memberTask } from '../platform/store/pool/members.js';
import { recordEventsIn } from '../platform/store/pool/projection.js';
import { seedRejectionRuns } from '../platform/store/pool/rejection-runs.js';
import { lastPolicyVersion, loadTaskStats } from '../platform/store/task-stats/view.js';
import { workerEvent } from './events.js';
import type { ExecutorClient } from './executor-client.js';

export interface CurriculumDeps {
  pool: pg.Pool;
  executor: ExecutorClient;
  now?: () => number;
}

/** A decision's event as the worker appends it. */
const recorded = (e: DecisionEvent): NewEvent =>
  workerEvent(e.type, e.eventId, e.payload as never, e.metadata) as NewEvent;

/**
 * By seed task id, its run of rejected children among its `streak` latest outcomes (validated or
 * rejected, in the order they were recorded): only seeds whose latest children were all rejected.
 */
export async function rejectionStreaks(
  c: pg.PoolClient,
  campaignId: string,
  streak: number,
  /** The seeds that may be selected (the pool's members); all when absent. */
  among?: readonly string[],
): Promise<Record<string, RejectionStreak>> {
  if (streak === 0) return {};
  return rejectionStreaksOf(await seedRejectionRuns(c, campaignId, among), streak);
}

async function lock(c: pg.PoolClient, campaignId: string): Promise<void> {
  await lockForTransaction(c, `rods-plan:${campaignId}`);
}

export function createCurriculumActivities(deps: CurriculumDeps) {
  const now = deps.now ?? Date.now;
  return {
    /**
     * Seeds the pool with the BFCL multi-turn tasks shipped in bfcl-eval (TaskSeeded each),
     * `perCategory` per category. Idempotent: a campaign seeded before returns its recorded seeding.
     */
    async seedCampaign(input: {
      campaignId: string;
      perCategory: number;
      categories?: string[];
    }): Promise<{ seeded: number; poolVersion: number }> {
      const done = await recordedPlan<{ seeded: number; poolVersion: number }>(
        deps.pool,
        input.campaignId,
        0,
      );
      if (done) return done;
      const categories = (input.categories ?? [...SEED_CATEGORIES]) as SeedCategory[];
      const seeds: TaskRecord[] = [];
      for (const cat of categories) {
        Context.current().heartbeat(cat);
        seeds.push(...(await deps.executor.seeds(cat, input.perCategory)));
      }
      return inTransaction(deps.pool, async (c) => {
        await lock(c, input.campaignId);
        const again = await recordedPlan<{ seeded: number; poolVersion: number }>(c, input.campaignId, 0);
        if (again) return again;
        const decisions = seedTasks(
          EMPTY_POOL,
          seeds.map((s) => ({ taskId: s.id, category: s.category })),
          0,
        );
        const state = applyDecisions(EMPTY_POOL, decisions);
        const events = seedEvents(input.campaignId, decisions, new Map(seeds.map((s) => [s.id, s])), now);
        await recordEventsIn(c, streams.campaign(input.campaignId), events.map(recorded));
        const result = { seeded: decisions.length, poolVersion: state.version };
        await insertPlan(c, input.campaignId, 0, state, result);
        return result;
      });
    },

    /**
     * Plans training step `step` once it is aggregated: folds the latest statistics into the pool,
     * retires by rule, queues validated candidates, selects boundary seeds and, at an injection
     * boundary, injects and prunes. Appends TaskRetired, SeedSelected, TaskInjected, PoolPruned
     * and (for a discarded duplicate) CandidateRejected.
     */
    async planStep(input: {
      campaignId: string;
      step: number;
      config: unknown;
      inFlight: string[];
      runningSyntheses: number;
    }): Promise<StepPlan> {
      const cfg: CampaignConfig = campaignConfigOf(input.config);
      const { campaignId, step } = input;
      // Heartbeats while it plans, so a worker killed mid-plan is noticed within the heartbeat
      // timeout (seconds) rather than at the start-to-close timeout; the retry finds the plan
      // recorded or plans afresh.
      const ctx = Context.current();
      const beat = setInterval(() => ctx.heartbeat(), 3000);
      try {
        return await inTransaction(deps.pool, async (c) => {
          await lock(c, campaignId);
          const again = await recordedPlan<StepPlan>(c, campaignId, step);
          if (again) return again;
          const prev = await latestPlanState<PoolState>(c, campaignId);
          if (!prev) throw new Error(`campaign ${campaignId} has no seeded pool; seed it first`);
          if (prev.step >= step)
            throw new Error(
              `campaign ${campaignId}: step ${step} is not after the last planned step ${prev.step}`,
            );
          // The pool's members only: the campaign's retired and pruned tasks keep their rows, and
          // reading those each step would cost more with every task the campaign ever had.
          const members = prev.state.members.map((m) => m.taskId);
          const stats = await loadTaskStats(c, campaignId, members);
          const cands = await validatedCandidates(c, campaignId);
          const decided = decideStep({
            campaignId,
            step,
            config: cfg,
            pool: prev.state,
            stats,
            candidates: cands,
            inFlight: input.inFlight,
            runningSyntheses: input.runningSyntheses,
            rejectionStreaks: await rejectionStreaks(
              c,
              campaignId,
              cfg.selection.rejectionBackoff.streak,
              members,
            ),
            now,
          });
          const { state } = decided.decisions;

          // The selected seeds' tasks, for their synthesis runs.
          const selectedOut: SelectedSeed[] = [];
          for (const d of decided.decisions.selected) {
            const task = await memberTask<TaskRecord | string>(c, campaignId, d.taskId);
            if (task) {
              selectedOut.push({
                taskId: d.taskId,
                category: d.category,
                phi: d.phi,
                quotaSlot: d.quotaSlot,
                stats: d.stats,
                rootSeedId: d.rootSeedId,
                depth: d.depth,
                selectionEventId: eventIds.seedSelected(campaignId, d.taskId, step),
                policyVersion: await lastPolicyVersion(c, campaignId, d.taskId),
                task: typeof task === 'string' ? (JSON.parse(task) as TaskRecord) : task,
              });
            }
          }
          if (decided.events.length > 0)
            await recordEventsIn(c, streams.campaign(campaignId), decided.events.map(recorded));
          const plan: StepPlan = { ...decided.plan, selected: selectedOut };
          await insertPlan(c, campaignId, step, state, plan);
          return plan;
        });
      } finally {
        clearInterval(beat);
      }
    },
  };
}

export type CurriculumActivities = ReturnType<typeof createCurriculumActivities>;
