import { describe, expect, it } from 'vitest';
import { statsOf } from '../test/support/domain/task-stats.js';
import { type CampaignConfig, type CampaignConfigInput, parseCampaignConfig } from './campaign-config.js';
import type { PoolDecision } from './pool/decisions.js';
import { applyDecisions } from './pool/evolve.js';
import { type RankedSeed, seedTasks } from './pool/policy.js';
import { EMPTY_POOL, findMember, type PoolState } from './pool/state.js';
import { planStep, type StepCandidate } from './step-plan.js';

const config = (over: CampaignConfigInput = {}): CampaignConfig => parseCampaignConfig(over);

const stats = (m: number, groups = 4, lastStep = 1) => statsOf(m, { groups, lastStep });
/** A task's statistics after its group of `step` (one more group a step). */
const stats_ = (m: number, step: number) => statsOf(m, { groups: step, lastStep: step });

function seeded(ids: string[], category = 'base'): PoolState {
  return applyDecisions(
    EMPTY_POOL,
    seedTasks(
      EMPTY_POOL,
      ids.map((taskId) => ({ taskId, category })),
      0,
    ),
  );
}

/** A pool with generated members g1..gn (children of s0), injected at step 1. */
function withGenerated(pool: PoolState, n: number): PoolState {
  const decisions: PoolDecision[] = [];
  for (let i = 1; i <= n; i++) {
    decisions.push({
      kind: 'inject',
      candidateId: `cg${i}`,
      taskId: `g${i}`,
      category: 'base',
      parents: ['s0'],
      rootSeedId: 's0',
      depth: 1,
      parentPhi: 0.5,
      step: 1,
      poolVersion: pool.version + 1,
    });
  }
  return applyDecisions(pool, decisions);
}

const candidate = (id: string, seed: string, over: Partial<StepCandidate> = {}): StepCandidate => ({
  candidateId: `c-${id}`,
  taskId: id,
  category: 'base',
  parents: [seed],
  parentPhi: 0.8,
  ...over,
});

describe('planStep', () => {
  it('decides observe, enqueue, retire, select, then discard, prune and inject, each folded before the next', () => {
    const cfg = config({ pool: { generatedCap: 2, epochSteps: 2, injectionShare: 1 } });
    const pool = withGenerated(seeded(['s0', 's1', 's2']), 2);
    const plan = planStep({
      pool,
      step: 2,
      config: cfg,
      stats: { s0: stats(0.5), s1: stats(0.95), s2: stats(0.4), g1: stats(0.3), g2: stats(0.1) },
      // two candidates name task n1: the second in queue order is discarded at the boundary
      candidates: [candidate('n1', 's0'), candidate('n1', 's2', { candidateId: 'c-n1-again' })],
    });
    expect(plan.decisions.map((d) => `${d.kind} ${'taskId' in d ? d.taskId : d.candidate.taskId}`)).toEqual([
      'observe g1',
      'observe g2',
      'observe s0',
      'observe s1',
      'observe s2',
      'enqueue n1',
      'enqueue n1',
      'retire g2', // burn-in
      'select s0', // φ 1.0 first
      'select s2',
      'discard n1',
      'inject n1',
    ]);
    expect(plan.retired.map((d) => [d.taskId, d.rule])).toEqual([['g2', 'burn_in']]);
    // retirement and injection are two change sets: one version each
    expect(plan.retired[0]!.poolVersion).toBe(pool.version + 1);
    expect(plan.injection.inject[0]!.poolVersion).toBe(pool.version + 2);
    expect(plan.state.version).toBe(pool.version + 2);
    expect(plan.state.members.map((m) => m.taskId)).toEqual(['g1', 'n1', 's0', 's1', 's2']);
    expect(plan.state.queue).toEqual([]);
    expect(plan.decisions).toEqual([
      ...plan.observed,
      ...plan.enqueued,
      ...plan.retired,
      ...plan.selected,
      ...plan.injection.discard,
      ...plan.injection.prune,
      ...plan.injection.inject,
    ]);
    // the new state is the fold of the decisions, in their order
    expect(applyDecisions(pool, plan.decisions)).toEqual(plan.state);
  });

  it('prunes before it injects when the generated cap is exceeded', () => {
    const cfg = config({ pool: { generatedCap: 2, epochSteps: 1, injectionShare: 1 } });
    const pool = withGenerated(seeded(['s0']), 2);
    const plan = planStep({
      pool,
      step: 3,
      config: cfg,
      stats: { g1: stats(0.3), g2: stats(0.5) },
      candidates: [candidate('n1', 's0')],
    });
    expect(
      plan.decisions.filter((d) => d.kind === 'prune' || d.kind === 'inject').map((d) => d.kind),
    ).toEqual(['prune', 'inject']);
    expect(plan.injection.prune.map((d) => d.taskId)).toEqual(['g1']); // lowest φ
    expect(plan.state.members.map((m) => m.taskId)).toEqual(['g2', 'n1', 's0']);
  });

  it('observes a member only when its statistics have a new reward group', () => {
    const cfg = config();
    let pool = seeded(['a', 'b', 'c']);
    pool = planStep({ pool, step: 1, config: cfg, stats: { a: stats(0.5, 1), b: stats(0.5, 1) } }).state;
    const plan = planStep({
      pool,
      step: 2,
      config: cfg,
      // b is unchanged, x is not a member
      stats: { a: stats(0.6, 2, 2), b: stats(0.5, 1), c: stats(0.4, 1, 2), x: stats(0.5) },
    });
    expect(plan.observed.map((d) => d.taskId)).toEqual(['a', 'c']);
    expect(findMember(plan.state, 'a')!.lastStats!.groupCount).toBe(2);
    expect(findMember(plan.state, 'a')!.firstObservedStep).toBe(1);
  });

  it('reads the members’ last observed statistics when given no statistics', () => {
    const cfg = config({ selection: { cooldownSteps: 0 } });
    const pool = planStep({
      pool: seeded(['a', 'b']),
      step: 1,
      config: cfg,
      stats: { a: stats(0.5), b: stats(0.3) },
    }).state;
    const plan = planStep({ pool, step: 2, config: cfg });
    expect(plan.observed).toEqual([]);
    expect(plan.selected.map((d) => d.taskId)).toEqual(['a', 'b']);
  });

  it('takes the statistics as a Map or as a record alike', () => {
    const cfg = config({ pool: { generatedCap: 1, epochSteps: 1 } });
    const pool = withGenerated(seeded(['s0', 's1']), 1);
    const record = { s0: stats(0.5), s1: stats(0.9), g1: stats(0.3) };
    const input = { pool, step: 2, config: cfg, candidates: [candidate('n1', 's0')] };
    const a = planStep({ ...input, stats: record });
    const b = planStep({ ...input, stats: new Map(Object.entries(record)) });
    expect(b).toEqual(a);
    expect(a.injection.prune.map((d) => [d.taskId, d.phi])).toEqual([['g1', stats(0.3).phi]]);
  });

  it('queues a candidate once: those already queued or in the pool are skipped', () => {
    const cfg = config({ pool: { epochSteps: 10 } });
    const first = planStep({
      pool: seeded(['s0']),
      step: 1,
      config: cfg,
      candidates: [candidate('n1', 's0')],
    });
    expect(first.enqueued.map((d) => d.candidate.candidateId)).toEqual(['c-n1']);
    const again = planStep({
      pool: first.state,
      step: 2,
      config: cfg,
      candidates: [candidate('n1', 's0'), candidate('n2', 's0')],
    });
    expect(again.enqueued.map((d) => d.candidate.candidateId)).toEqual(['c-n2']);
    expect(again.state.queue.map((q) => [q.candidateId, q.queuedAtStep])).toEqual([
      ['c-n1', 1],
      ['c-n2', 2],
    ]);
  });

  it('derives a candidate’s lineage from its seed, or from seedLineage when the seed has left the pool', () => {
    const cfg = config({ pool: { epochSteps: 10 } });
    const pool = withGenerated(seeded(['s0']), 1);
    const plan = planStep({
      pool,
      step: 2,
      config: cfg,
      candidates: [
        candidate('n1', 'g1'),
        candidate('n2', 'gone', { seedLineage: { rootSeedId: 's9', depth: 2 } }),
        candidate('n3', 'unknown'),
      ],
    });
    expect(plan.enqueued.map((d) => [d.candidate.taskId, d.candidate.rootSeedId, d.candidate.depth])).toEqual(
      [
        ['n1', 's0', 2],
        ['n2', 's9', 3],
      ],
    );
    // a candidate whose seed is unknown is left out, with the reason, and changes nothing
    expect(plan.unqueued).toEqual([{ candidateId: 'c-n3', reason: expect.stringContaining('"unknown"') }]);
    expect(plan.state.queue.map((q) => q.candidateId)).toEqual(['c-n1', 'c-n2']);
  });

  it('selects around syntheses in flight and under the running capacity', () => {
    const cfg = config({ selection: { budgetPerStep: 8, maxConcurrentSyntheses: 3 } });
    const pool = seeded(['a', 'b', 'c', 'd']);
    const all = { a: stats(0.5), b: stats(0.45), c: stats(0.4), d: stats(0.35) };
    const plan = planStep({
      pool,
      step: 1,
      config: cfg,
      stats: all,
      selection: { inFlight: ['a'], runningSyntheses: 1 },
    });
    expect(plan.selected.map((d) => d.taskId)).toEqual(['b', 'c']);
    expect(findMember(plan.state, 'b')!.lastSelectedStep).toBe(1);
    expect(findMember(plan.state, 'a')!.lastSelectedStep).toBeUndefined();
  });

  it('takes another seed ranking as an option, under the same quota, capacity and cooldown rules', () => {
    const cfg = config({
      selection: {
        budgetPerStep: 3,
        maxConcurrentSyntheses: 4,
        cooldownSteps: 5,
        perCategoryQuota: { base: 1, miss_func: 2, miss_param: 0, long_context: 0 },
      },
    });
    let pool = applyDecisions(
      EMPTY_POOL,
      seedTasks(
        EMPTY_POOL,
        [
          { taskId: 'b1', category: 'base' },
          { taskId: 'b2', category: 'base' },
          { taskId: 'm1', category: 'miss_func' },
          { taskId: 'm2', category: 'miss_func' },
          { taskId: 'm3', category: 'miss_func' },
          { taskId: 'm4', category: 'miss_func' },
        ],
        0,
      ),
    );
    // m4 was selected at step 1: cooling down at step 2
    pool = applyDecisions(pool, [
      {
        kind: 'select',
        taskId: 'm4',
        category: 'miss_func',
        step: 1,
        phi: 1,
        quotaSlot: 0,
        rank: 0,
        stats: stats(0.5),
        rootSeedId: 'm4',
        depth: 0,
      },
    ]);
    // Every task, hard and mastered ones too, in reverse id order.
    const reverse = (p: PoolState): RankedSeed[] =>
      [...p.members].reverse().map((member) => ({ member, stats: stats(0.05), phi: 0 }));
    const plan = planStep({
      pool,
      step: 2,
      config: cfg,
      stats: Object.fromEntries(pool.members.map((m) => [m.taskId, stats(0.05)])),
      selection: { ranking: reverse },
    });
    // m4 cools down, miss_func has two slots, base one
    expect(plan.selected.map((d) => [d.taskId, d.quotaSlot, d.rank, d.phi])).toEqual([
      ['m3', 0, 0, 0],
      ['m2', 1, 1, 0],
      ['b2', 0, 2, 0],
    ]);
    // two syntheses running leave room for two
    const two = planStep({
      pool,
      step: 2,
      config: cfg,
      selection: { ranking: reverse, runningSyntheses: 2 },
    });
    expect(two.selected.map((d) => d.taskId)).toEqual(['m3', 'm2']);
  });

  it('is deterministic and leaves its input unchanged', () => {
    const cfg = config({ pool: { generatedCap: 2, epochSteps: 1 } });
    const pool = withGenerated(seeded(['s0', 's1']), 2);
    const snapshot = JSON.parse(JSON.stringify(pool));
    const input = {
      pool,
      step: 3,
      config: cfg,
      stats: { s0: stats(0.5), s1: stats(0.6), g1: stats(0.3), g2: stats(0.4) },
      candidates: [candidate('n1', 's0'), candidate('n2', 's1')],
    };
    expect(planStep(input)).toEqual(planStep(input));
    expect(pool).toEqual(snapshot);
  });
});

describe('useful generated tasks', () => {
  it('counts a generated task once, when a group first puts it in the boundary band within k steps of its injection', () => {
    // g1 and g2 injected at step 1 (withGenerated); k = 10.
    const cfg = config({ pool: { usefulWithinSteps: 10 } });
    let pool = withGenerated(seeded(['s0']), 2);
    const at = (step: number, bands: Record<string, number>) => {
      const stats = new Map(Object.entries(bands).map(([id, m]) => [id, stats_(m, step)] as const));
      const p = planStep({ pool, step, config: cfg, stats });
      pool = p.state;
      return p;
    };
    // Step 3: g1 mastered (kept: not above 0.95), g2 in the boundary band (useful: 2 steps after its injection).
    expect(at(3, { g1: 0.9, g2: 0.5 }).state.useful).toBe(1);
    // Step 5: g2 again in the band: not counted twice.
    expect(at(5, { g1: 0.9, g2: 0.6 }).state.useful).toBe(1);
    // Step 20: g1 reaches the band, 19 steps after its injection: too late to count.
    const late = at(20, { g1: 0.5, g2: 0.6 });
    expect(late.state.useful).toBe(1);
    expect(late.state.members.find((m) => m.taskId === 'g1')?.firstBoundaryStep).toBe(20);
    // A seed in the band is not a generated task: never counted.
    expect(at(21, { s0: 0.5 }).state.useful).toBe(1);
  });
});

describe('planStep ablations (config.ablation)', () => {
  // Ten boundary seeds and one mastered seed, all observed; a candidate waits for injection.
  const ids = Array.from({ length: 10 }, (_, i) => `s${i}`);
  const statsByTask = new Map([
    ...ids.map((id, i) => [id, stats(0.3 + i * 0.05)] as const),
    ['old', stats(0.99)] as const,
  ]);
  const plan = (ablation: CampaignConfigInput['ablation'], step = 10) =>
    planStep({
      pool: seeded([...ids, 'old']),
      step,
      config: config({
        ablation,
        pool: { retireSeeds: true, epochSteps: 10 },
        selection: { perCategoryQuota: { base: 4 }, budgetPerStep: 4 },
      }),
      stats: statsByTask,
      candidates: [candidate('n1', 's0')],
    });

  it('with every switch on is the method: retires, selects by φ, injects', () => {
    const p = plan(undefined);
    expect(p.retired.map((d) => d.taskId)).toEqual(['old']);
    expect(p.selected.map((d) => d.taskId)).toEqual(['s4', 's3', 's5', 's2']);
    expect(p.injection.inject.map((d) => d.taskId)).toEqual(['n1']);
  });

  it('retirement off retires nothing by rule', () => {
    expect(plan({ retirement: false }).retired).toEqual([]);
  });

  it('a static pool synthesizes from the initial boundary once, injects that wave as it comes, and changes no more', () => {
    const cfg = config({
      ablation: { pool: 'static' },
      pool: { retireSeeds: true, epochSteps: 10, injectionShare: 1 },
      selection: { perCategoryQuota: { base: 4 }, budgetPerStep: 4, cooldownSteps: 0 },
    });
    const step = (pool: PoolState, n: number, candidates: StepCandidate[] = []) =>
      planStep({ pool, step: n, config: cfg, stats: statsByTask, candidates });
    // Before the first injection boundary nothing is selected; at it (step 10, after the trainer's
    // first epoch), every boundary seed at once, not the budget of 4; the mastered seed stays.
    const early = step(seeded([...ids, 'old']), 1);
    expect([early.selected, early.retired]).toEqual([[], []]);
    const first = step(early.state, 10);
    expect(first.selected.map((d) => d.taskId).sort()).toEqual([...ids].sort());
    expect(first.retired).toEqual([]);
    // Step 11: nothing more is selected, though the cooldown would allow it.
    const second = step(first.state, 11, [candidate('n1', 's4')]);
    expect(second.selected).toEqual([]);
    // Step 20, the next injection boundary: the wave's candidates go in as they come ...
    const tenth = step(second.state, 20, [candidate('n2', 's3')]);
    expect(tenth.injection.inject.map((d) => d.taskId)).toEqual(['n1', 'n2']);
    const twentieth = step(tenth.state, 30, [candidate('n3', 's5')]);
    expect(twentieth.injection.inject.map((d) => d.taskId)).toEqual(['n3']);
    // ... and then the pool no longer changes: nothing selected, retired or injected.
    const thirtieth = step(twentieth.state, 40);
    expect([thirtieth.selected, thirtieth.retired, thirtieth.injection.inject]).toEqual([[], [], []]);
    expect(thirtieth.state.members).toEqual(
      twentieth.state.members.map((m) => ({ ...m, lastStats: m.lastStats })),
    );
    // The method, from the same pool: selection goes on at step 11, within the budget.
    const method = config({
      selection: { perCategoryQuota: { base: 4 }, budgetPerStep: 4, cooldownSteps: 0 },
    });
    expect(
      planStep({ pool: first.state, step: 11, config: method, stats: statsByTask }).selected,
    ).toHaveLength(4);
  });

  it('injection off: the candidate waits in the queue, nothing is injected or pruned', () => {
    const p = plan({ injection: false });
    expect(p.injection).toMatchObject({ inject: [], prune: [], discard: [] });
    expect(p.state.queue.map((q) => q.candidateId)).toEqual(['c-n1']);
  });

  it('random selection draws among observed members whatever their band, the same for the same seed and step', () => {
    const a = plan({ selection: 'random', randomSeed: 7, retirement: false });
    const again = plan({ selection: 'random', randomSeed: 7, retirement: false });
    expect(a.selected.map((d) => d.taskId)).toEqual(again.selected.map((d) => d.taskId));
    expect(a.selected).toHaveLength(4);
    const draws = new Set<string>();
    for (let seed = 0; seed < 20; seed++)
      for (const d of plan({ selection: 'random', randomSeed: seed, retirement: false }).selected)
        draws.add(d.taskId);
    // every member can be drawn, the mastered one included, unlike the φ ranking
    expect([...draws].sort()).toEqual([...ids, 'old'].sort());
    expect(plan({ selection: 'random', randomSeed: 7 }, 11).selected.map((d) => d.taskId)).not.toEqual(
      a.selected.map((d) => d.taskId),
    );
  });
});
