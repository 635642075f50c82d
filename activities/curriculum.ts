// The curriculum step: seeding a campaign's pool and planning each training step with the pure
// step decider (planStep, domain/step-plan.ts). The pool state is kept beside the events in
// PostgreSQL (campaign_plans): one transaction loads it, decides (decideStep, pure), appends the
// decisions as events, updates the projections and stores the new state with the plan. A retried
// activity finds its plan recorded and returns it instead of deciding again, so every decision
// happens once.
import { Context } from '@temporalio/activity';
import type pg from 'pg';
import { type CampaignConfig, isInjectionBoundary } from '../domain/campaign-config.js';
import { candidateHash } from '../domain/candidate.js';
import { eventIds, streams } from '../domain/ids.js';
import { applyDecisions } from '../domain/pool/evolve.js';
import { type RejectionStreak, seedTasks } from '../domain/pool/policy.js';
import { EMPTY_POOL, type PoolState } from '../domain/pool/state.js';
import {
  planStep,
  type SelectedSeed,
  type StepCandidate,
  type StepDecisions,
  type StepPlan,
} from '../domain/step-plan.js';

import type { SeedCategory, TaskRecord } from '../domain/task.js';
import { SEED_CATEGORIES } from '../domain/task.js';
import { insertPlan, latestPlanState, recordedPlan } from '../platform/store/campaign-plans.js';
import { inTransaction } from '../platform/store/db.js';
import { latestOutcomesPerSeed } from '../platform/store/events/campaign-reads.js';
import type { NewEvent } from '../platform/store/events/event-store.js';
import { lockForTransaction } from '../platform/store/locks.js';
import { type CandidateRow, validatedCandidates } from '../platform/store/pool/candidates.js';
import { memberTask } from '../platform/store/pool/members.js';
import { recordEventsIn } from '../platform/store/pool/projection.js';
import { lastPolicyVersion, loadTaskStats } from '../platform/store/task-stats/view.js';
import type { TaskStats } from '../schemas/types.generated.js';
import { campaignConfigOf } from './campaign-config.js';
import { workerEvent } from './events.js';
import type { ExecutorClient } from './executor-client.js';

export interface CurriculumDeps {
  pool: pg.Pool;
  executor: ExecutorClient;
  now?: () => number;
}

export type { CandidateRow };

const event = workerEvent;

/**
 * A candidate row as planStep takes it: parents from its lineage (else its seed), and the lineage
 * its synthesis recorded for the seed, for when the seed has left the pool.
 */
export function stepCandidate(r: CandidateRow): StepCandidate {
  const parents = r.lineage.parents?.length ? r.lineage.parents : [r.seed_task_id];
  const root = r.lineage.rootSeedId;
  return {
    candidateId: r.candidate_id,
    taskId: String((r.candidate as { id?: string }).id ?? r.candidate_id),
    category: String((r.candidate as { category?: string }).category ?? r.lineage.category ?? 'base'),
    parents,
    parentPhi: r.lineage.parentPhi ?? 0,
    seedLineage: typeof root === 'string' ? { rootSeedId: root, depth: r.lineage.depth ?? 0 } : undefined,
  };
}

/** A step's decisions, the events that record them and its plan (its seeds' tasks still to look up). */
export interface DecidedStep {
  decisions: StepDecisions;
  events: NewEvent[];
  /** The plan with `selected` empty: the activity fills it from the pool_members rows. */
  plan: StepPlan;
}

/**
 * The pure part of planning a step: planStep over the loaded pool, statistics and validated
 * candidates, and the decisions as events in the order they are appended (retirements,
 * selections, discards, injections, the prune).
 */
export function decideStep(input: {
  campaignId: string;
  step: number;
  config: CampaignConfig;
  pool: PoolState;
  stats: Record<string, TaskStats>;
  candidates: readonly CandidateRow[];
  inFlight: string[];
  runningSyntheses: number;
  rejectionStreaks?: Record<string, RejectionStreak>;
  now: () => number;
}): DecidedStep {
  const { campaignId, step, config: cfg, now } = input;
  const decisions = planStep({
    pool: input.pool,
    step,
    config: cfg,
    stats: input.stats,
    candidates: input.candidates.map(stepCandidate),
    selection: {
      inFlight: input.inFlight,
      runningSyntheses: input.runningSyntheses,
      rejectionStreaks: input.rejectionStreaks,
    },
  });
  const { retired, selected, injection, state } = decisions;
  const candidateRows = new Map(input.candidates.map((r) => [r.candidate_id, r]));

  const ev: NewEvent[] = [];
  for (const d of retired) {
    ev.push(
      event('TaskRetired', eventIds.taskRetired(campaignId, d.taskId, step), {
        campaignId,
        taskId: d.taskId,
        rule: d.rule,
        stats: d.stats,
        poolVersion: d.poolVersion,
        step,
        occurredAt: now(),
      }),
    );
  }
  for (const d of selected) {
    ev.push(
      event('SeedSelected', eventIds.seedSelected(campaignId, d.taskId, step), {
        campaignId,
        seedTaskId: d.taskId,
        category: d.category,
        step,
        phi: d.phi,
        quotaSlot: d.quotaSlot,
        stats: d.stats,
        occurredAt: now(),
      }),
    );
  }
  for (const d of injection.discard) {
    const row = candidateRows.get(d.candidateId);
    ev.push(
      event('CandidateRejected', eventIds.candidateDiscarded(campaignId, d.candidateId), {
        campaignId,
        synthesisId: String(row?.lineage?.synthesisId ?? 'unknown'),
        candidateId: d.candidateId,
        seedTaskId: row?.seed_task_id ?? 'unknown',
        stage: 'critique',
        reasonCode: d.reason,
        reason: `task id ${d.taskId} is already in the pool or the queue`,
        occurredAt: now(),
      }),
    );
  }
  for (const d of injection.inject) {
    const row = candidateRows.get(d.candidateId);
    const task = row?.candidate ?? {};
    ev.push(
      event(
        'TaskInjected',
        eventIds.taskInjected(campaignId, d.taskId),
        {
          campaignId,
          taskId: d.taskId,
          candidateId: d.candidateId,
          category: d.category,
          task: JSON.stringify(task),
          taskHash: row?.candidate_hash ?? candidateHash(task),
          parents: d.parents,
          poolVersion: d.poolVersion,
          step,
          occurredAt: now(),
        },
        { rootSeed: d.rootSeedId },
      ),
    );
  }
  if (injection.prune.length > 0) {
    ev.push(
      event('PoolPruned', eventIds.poolPruned(campaignId, step), {
        campaignId,
        cap: injection.generatedCap,
        generatedBefore: injection.generatedBefore,
        pruned: injection.prune.map((p) => ({ taskId: p.taskId, phi: p.phi })),
        poolVersion: injection.prune[0]!.poolVersion,
        step,
        occurredAt: now(),
      }),
    );
  }
  const plan: StepPlan = {
    step,
    poolVersion: state.version,
    versionChanged: state.version !== input.pool.version,
    boundary: isInjectionBoundary(step, cfg),
    retired: retired.map((d) => ({ taskId: d.taskId, rule: d.rule })),
    selected: [],
    injected: injection.inject.map((d) => d.taskId),
    pruned: injection.prune.map((d) => d.taskId),
    queueLength: state.queue.length,
    activeSize: state.members.length,
    generated: state.members.filter((m) => m.origin === 'generated').length,
    inputs: {
      inFlight: input.inFlight,
      runningSyntheses: input.runningSyntheses,
      enqueued: decisions.enqueued.map((d) => d.candidate.candidateId),
      ...(input.rejectionStreaks && Object.keys(input.rejectionStreaks).length > 0
        ? { rejectionStreaks: input.rejectionStreaks }
        : {}),
    },
    ...(decisions.passedOver.length > 0 ? { passedOver: decisions.passedOver } : {}),
  };
  return { decisions, events: ev, plan };
}

/**
 * By seed task id, its run of rejected children among its `streak` latest outcomes (validated or
 * rejected, in the order they were recorded): only seeds whose latest children were all rejected.
 */
export async function rejectionStreaks(
  c: pg.PoolClient,
  campaignId: string,
  streak: number,
): Promise<Record<string, RejectionStreak>> {
  if (streak === 0) return {};
  const rows = await latestOutcomesPerSeed(c, campaignId, streak);
  const out: Record<string, RejectionStreak> = {};
  const broken = new Set<string>();
  for (const r of rows) {
    if (broken.has(r.seed)) continue;
    if (!r.rejected) {
      broken.add(r.seed);
      continue;
    }
    const s = out[r.seed] ?? { count: 0, reasons: [] };
    out[r.seed] = s;
    s.count++;
    s.reasons.push(r.reason ?? 'rejected');
  }
  for (const id of broken) delete out[id];
  return out;
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
        const byId = new Map(seeds.map((s) => [s.id, s]));
        const events = decisions.map((d) => {
          const task = byId.get(d.taskId)!;
          return event('TaskSeeded', eventIds.taskSeeded(input.campaignId, d.taskId), {
            campaignId: input.campaignId,
            taskId: d.taskId,
            category: d.category,
            task: JSON.stringify(task),
            taskHash: candidateHash(task),
            source: `bfcl-eval ${task.category} ${task.id}`,
            poolVersion: d.poolVersion,
            occurredAt: now(),
          });
        });
        await recordEventsIn(c, streams.campaign(input.campaignId), events);
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
          const stats = await loadTaskStats(c, campaignId);
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
            rejectionStreaks: await rejectionStreaks(c, campaignId, cfg.selection.rejectionBackoff.streak),
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
            await recordEventsIn(c, streams.campaign(campaignId), decided.events);
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
