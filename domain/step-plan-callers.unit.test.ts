// The live planner and what-if decide a step through the same function: planStep is wrapped in a
// spy (the real implementation still runs), a campaign is planned step by step with the curriculum
// activity's pure core (decideStep), and what-if's pure core re-decides the recorded campaign. Both
// must have called planStep, once per step each, and what-if must get the very decisions the live
// planner took.

import { describe, expect, it, vi } from 'vitest';
import type { RecordedGroup } from '../analysis/replay/reward-stream.js';
import { foldGroups } from '../analysis/replay/reward-stream.js';
import { type RecordedPlan, whatIfReport } from '../analysis/replay/whatif.js';
import type { TaskStats } from '../schemas/types.generated.js';
import { parseCampaignConfig } from './campaign-config.js';
import { DedupeWindows } from './dedupe.js';
import { applyDecisions } from './pool/evolve.js';
import { seedTasks } from './pool/policy.js';
import { EMPTY_POOL, type PoolState } from './pool/state.js';
import { decideStep, type ValidatedCandidate } from './step-events.js';
import { planStep, type StepDecisions } from './step-plan.js';
import { statsRecord, type TaskState } from './task-stats.js';

vi.mock('./step-plan.js', async (importOriginal) => {
  const real = await importOriginal<typeof import('./step-plan.js')>();
  return { ...real, planStep: vi.fn(real.planStep) };
});

const CATEGORIES = ['base', 'miss_func', 'miss_param', 'long_context'];

/** A group of 16 rewards with k ones, k varying by task and step. */
function group(taskId: string, index: number, step: number): RecordedGroup {
  const k = (index * 5 + step * 3) % 17;
  return {
    eventId: `${taskId}@${step}`,
    taskId,
    step,
    rewards: Array.from({ length: 16 }, (_, i) => (i < k ? 1 : 0)),
  };
}

describe('one step decider for live planning and what-if', () => {
  it('the curriculum activity and what-if both plan through planStep, to the same decisions', () => {
    const spy = vi.mocked(planStep);
    spy.mockClear();
    const campaignId = 'callers';
    const cfg = parseCampaignConfig({
      pool: { generatedCap: 4, epochSteps: 2, injectionShare: 0.5 },
      selection: { cooldownSteps: 1 },
    });
    const seeded = applyDecisions(
      EMPTY_POOL,
      seedTasks(
        EMPTY_POOL,
        Array.from({ length: 12 }, (_, i) => ({ taskId: `seed-${i}`, category: CATEGORIES[i % 4]! })),
        0,
      ),
    );

    // Live: each step's reward groups folded into statistics, then planned by the activity's core.
    const steps = 8;
    let pool: PoolState = seeded;
    const states = new Map<string, TaskState>();
    const seen = new DedupeWindows();
    const groups: RecordedGroup[] = [];
    const candidates: ValidatedCandidate[] = [];
    const plans: { step: number; result: RecordedPlan }[] = [];
    const live: StepDecisions[] = [];
    for (let step = 1; step <= steps; step++) {
      const stepGroups = pool.members.map((m, i) => group(m.taskId, i, step));
      groups.push(...stepGroups);
      foldGroups(stepGroups, states, seen, cfg);
      const stats: Record<string, TaskStats> = {};
      for (const [id, s] of states) stats[id] = statsRecord(s);
      const decided = decideStep({
        campaignId,
        step,
        config: cfg,
        pool,
        stats,
        candidates,
        inFlight: [],
        runningSyntheses: 0,
        now: () => 0,
      });
      live.push(decided.decisions);
      pool = decided.decisions.state;
      plans.push({
        step,
        result: { ...decided.plan, selected: decided.decisions.selected.map((d) => ({ taskId: d.taskId })) },
      });
      // each selected seed's synthesis yields a validated candidate, queued at the next step
      for (const d of decided.decisions.selected) {
        candidates.push({
          candidate_id: `cand-${d.taskId}-${step}`,
          candidate_hash: `hash-${d.taskId}-${step}`,
          seed_task_id: d.taskId,
          candidate: { id: `${d.taskId}~s${step}`, category: d.category },
          lineage: { parentPhi: d.phi, parents: [d.taskId], step } as ValidatedCandidate['lineage'],
        });
      }
    }
    expect(spy).toHaveBeenCalledTimes(steps);
    const kinds = new Set(live.flatMap((d) => d.decisions.map((x) => x.kind)));
    expect([...kinds].sort()).toEqual(['enqueue', 'inject', 'observe', 'prune', 'retire', 'select']);

    // What-if under the campaign's own config re-decides every step through planStep.
    const report = whatIfReport(campaignId, cfg, { seeded, plans, candidates, groups });
    expect(spy).toHaveBeenCalledTimes(2 * steps);
    expect(report.reproduced).toBe(true);
    expect(report.totals.injected.whatif).toBeGreaterThan(0);
    for (let i = 0; i < steps; i++) {
      expect(spy.mock.calls[steps + i]![0].step).toBe(i + 1);
      expect(spy.mock.results[steps + i]!.value.decisions).toEqual(live[i]!.decisions);
    }
  });
});
