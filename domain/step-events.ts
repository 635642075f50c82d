// A step's decisions as the events that record them. decideStep is the curriculum's decider:
// planStep (step-plan.ts) over the loaded pool, statistics and validated candidates, then each
// decision as its typed event, in the order they are appended (retirements, selections, discards,
// injections, the prune). The pool state after them is applyDecisions' (pool/evolve.ts); the SQL
// pool projection writes what these events say. Pure: the planning activity appends the events,
// the callers test (step-plan-callers) re-decides recorded campaigns with it.
import type { EventName, EventPayloads, TaskStats } from '../schemas/types.generated.js';
import { type CampaignConfig, isInjectionBoundary } from './campaign-config.js';
import { candidateHash } from './candidate.js';
import { eventIds } from './ids.js';
import type { SeedDecision } from './pool/decisions.js';
import type { RejectionStreak } from './pool/policy.js';
import type { PoolState } from './pool/state.js';
import { planStep, type StepCandidate, type StepDecisions, type StepPlan } from './step-plan.js';
import type { TaskRecord } from './task.js';

/** A decision as an event: the payload without its id (the id is the event's), and metadata. */
export type DecisionEvent = {
  [N in EventName]: {
    type: N;
    eventId: string;
    payload: Omit<EventPayloads[N], 'eventId'>;
    metadata?: Record<string, unknown>;
  };
}[EventName];

function event<N extends EventName>(
  type: N,
  eventId: string,
  payload: Omit<EventPayloads[N], 'eventId'>,
  metadata?: Record<string, unknown>,
): DecisionEvent {
  return { type, eventId, payload, ...(metadata ? { metadata } : {}) } as DecisionEvent;
}

/** A validated candidate as the candidates table holds it (platform/store/pool/candidates.ts reads it). */
export interface ValidatedCandidate {
  candidate_id: string;
  candidate_hash: string;
  seed_task_id: string;
  candidate: Record<string, unknown>;
  lineage: {
    parentPhi?: number;
    parents?: string[];
    category?: string;
    rootSeedId?: string;
    depth?: number;
    synthesisId?: string;
  };
}

/** The seeding decisions as TaskSeeded events, with each seed's task. */
export function seedEvents(
  campaignId: string,
  decisions: readonly SeedDecision[],
  tasks: ReadonlyMap<string, TaskRecord>,
  now: () => number,
): DecisionEvent[] {
  return decisions.map((d) => {
    const task = tasks.get(d.taskId);
    if (!task) throw new Error(`seed ${d.taskId}: no task loaded for it`);
    return event('TaskSeeded', eventIds.taskSeeded(campaignId, d.taskId), {
      campaignId,
      taskId: d.taskId,
      category: d.category,
      task: JSON.stringify(task),
      taskHash: candidateHash(task),
      source: `bfcl-eval ${task.category} ${task.id}`,
      poolVersion: d.poolVersion,
      occurredAt: now(),
    });
  });
}

/** A seed's run of rejected children since its latest validated one (reasons newest first). */
export interface RejectionRun {
  seedTaskId: string;
  run: number;
  reasons: string[];
  /** Whether any child of the seed was ever validated. */
  hasValidated: boolean;
}

/**
 * By seed task id, its run of rejected children among its `streak` latest outcomes: only seeds
 * whose `streak` latest children (or all of them, when it has fewer) were all rejected.
 */
export function rejectionStreaksOf(
  runs: readonly RejectionRun[],
  streak: number,
): Record<string, RejectionStreak> {
  const out: Record<string, RejectionStreak> = {};
  if (streak <= 0) return out;
  for (const r of runs) {
    // Fewer rejections than the streak count only when no child was ever validated: otherwise a
    // validated one is among the seed's `streak` latest outcomes.
    if (r.run <= 0 || (r.run < streak && r.hasValidated)) continue;
    const count = Math.min(r.run, streak);
    out[r.seedTaskId] = { count, reasons: r.reasons.slice(0, count) };
  }
  return out;
}

/**
 * A candidate row as planStep takes it: parents from its lineage (else its seed), and the lineage
 * its synthesis recorded for the seed, for when the seed has left the pool.
 */
export function stepCandidate(r: ValidatedCandidate): StepCandidate {
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
  events: DecisionEvent[];
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
  candidates: readonly ValidatedCandidate[];
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

  const ev: DecisionEvent[] = [];
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
        // The decider's lineage (domain/lineage.ts): the projection stores it as decided.
        { rootSeed: d.rootSeedId, depth: d.depth },
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
    useful: state.useful ?? 0,
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
