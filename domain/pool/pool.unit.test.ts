import { describe, expect, it } from 'vitest';
import type { TaskStats } from '../../schemas/types.generated.js';
import { statsOf } from '../../test/support/domain/task-stats.js';
import { type CampaignConfig, type CampaignConfigInput, parseCampaignConfig } from '../campaign-config.js';
import { childLineage, LineageError } from '../lineage.js';
import { type InjectDecision, type PoolDecision, PoolDecisionError } from './decisions.js';
import { applyDecisions } from './evolve.js';
import {
  injectionCap,
  manualRetirement,
  planDecisions,
  planInjection,
  queueCandidate,
  retire,
  seedIneligibility,
  seedTasks,
  selectSeeds,
} from './policy.js';
import {
  compareQueued,
  EMPTY_POOL,
  findMember,
  generatedCount,
  type PoolState,
  type QueuedCandidate,
} from './state.js';

const PAPER = parseCampaignConfig({});
const config = (over: CampaignConfigInput): CampaignConfig => parseCampaignConfig(over);

const stats = (m: number, lastStep = 1, over: Partial<TaskStats> = {}) => statsOf(m, { lastStep }, over);

function seeded(seeds: [string, string][], step = 0): PoolState {
  return applyDecisions(
    EMPTY_POOL,
    seedTasks(
      EMPTY_POOL,
      seeds.map(([taskId, category]) => ({ taskId, category })),
      step,
    ),
  );
}

function queued(
  candidateId: string,
  over: Partial<QueuedCandidate> = {},
  parents: string[] = ['s1'],
): QueuedCandidate {
  return {
    candidateId,
    taskId: `t-${candidateId}`,
    category: 'base',
    parents,
    rootSeedId: 's1',
    depth: 1,
    parentPhi: 0.9,
    queuedAtStep: 1,
    ...over,
  };
}

/** A pool with seeds and generated tasks injected at step 0 (one change set each). */
function poolWith(seeds: string[], generated: string[], category = 'base'): PoolState {
  let p = seeded(seeds.map((s) => [s, category]));
  const inject: InjectDecision[] = generated.map((g) => ({
    kind: 'inject',
    candidateId: `c-${g}`,
    taskId: g,
    category,
    parents: [seeds[0]!],
    rootSeedId: seeds[0]!,
    depth: 1,
    parentPhi: 0.5,
    step: 0,
    poolVersion: p.version + 1,
  }));
  if (inject.length > 0) p = applyDecisions(p, inject);
  return p;
}

describe('seeding and lineage', () => {
  it('seeds enter as their own roots at depth 0, in one change set, members sorted by id', () => {
    const p = seeded([
      ['b', 'base'],
      ['a', 'miss_func'],
      ['c', 'long_context'],
    ]);
    expect(p.version).toBe(1);
    expect(p.members.map((m) => m.taskId)).toEqual(['a', 'b', 'c']);
    expect(findMember(p, 'a')).toEqual({
      taskId: 'a',
      origin: 'seed',
      category: 'miss_func',
      parents: [],
      rootSeedId: 'a',
      depth: 0,
      injectedAtStep: 0,
    });
    expect(seedTasks(p, [{ taskId: 'a', category: 'base' }], 1)).toEqual([]);
    const dup = seedTasks(
      EMPTY_POOL,
      [
        { taskId: 'x', category: 'base' },
        { taskId: 'x', category: 'base' },
      ],
      0,
    );
    expect(dup).toHaveLength(1);
  });

  it('derives root and depth from the parents, seed first', () => {
    const known = new Map([
      ['seed', { rootSeedId: 'seed', depth: 0 }],
      ['g1', { rootSeedId: 'seed', depth: 1 }],
      ['g2', { rootSeedId: 'seed', depth: 2 }],
      ['other', { rootSeedId: 'other-seed', depth: 3 }],
    ]);
    const of = (id: string) => known.get(id);
    expect(childLineage(['seed'], of)).toEqual({ rootSeedId: 'seed', depth: 1 });
    expect(childLineage(['g2'], of)).toEqual({ rootSeedId: 'seed', depth: 3 });
    // root from the first parent, depth from the deepest known parent
    expect(childLineage(['g1', 'other', 'unknown'], of)).toEqual({ rootSeedId: 'seed', depth: 4 });
    expect(() => childLineage([], of)).toThrow(LineageError);
    expect(() => childLineage(['nope'], of)).toThrow(/first parent "nope" has no known lineage/);
    expect(() => childLineage(['seed', 'seed'], of)).toThrow(/twice/);
  });

  it('queues a candidate with the lineage of its seed: from the pool, or from a lookup once the seed retired', () => {
    let p = seeded([['s1', 'base']]);
    const e1 = queueCandidate(
      p,
      { candidateId: 'c1', taskId: 'g1', category: 'base', parents: ['s1'], parentPhi: 0.8 },
      3,
    );
    expect(e1.candidate).toEqual({
      candidateId: 'c1',
      taskId: 'g1',
      category: 'base',
      parents: ['s1'],
      rootSeedId: 's1',
      depth: 1,
      parentPhi: 0.8,
      queuedAtStep: 3,
    });
    p = applyDecisions(p, [e1]);
    const plan = planInjection(p, 10, PAPER);
    p = applyDecisions(p, planDecisions(plan));
    expect(findMember(p, 'g1')).toMatchObject({
      origin: 'generated',
      rootSeedId: 's1',
      depth: 1,
      parents: ['s1'],
    });
    // a grandchild of the seed
    const e2 = queueCandidate(
      p,
      { candidateId: 'c2', taskId: 'g2', category: 'base', parents: ['g1'], parentPhi: 0.7 },
      11,
    );
    expect(e2.candidate).toMatchObject({ rootSeedId: 's1', depth: 2 });
    // g1 retires before its child is validated: the caller passes the lineage from the selection
    p = applyDecisions(p, [manualRetirement(p, 'g1', 12)]);
    expect(() =>
      queueCandidate(
        p,
        { candidateId: 'c3', taskId: 'g3', category: 'base', parents: ['g1'], parentPhi: 0.7 },
        12,
      ),
    ).toThrow(LineageError);
    const e3 = queueCandidate(
      p,
      { candidateId: 'c3', taskId: 'g3', category: 'base', parents: ['g1'], parentPhi: 0.7 },
      12,
      (id) => (id === 'g1' ? { rootSeedId: 's1', depth: 1 } : undefined),
    );
    expect(e3.candidate).toMatchObject({ rootSeedId: 's1', depth: 2 });
  });
});

describe('retire', () => {
  const pool = poolWith(
    ['s-hi', 's-lo', 's-mid'],
    ['g-hi', 'g-edge', 'g-lo', 'g-floor', 'g-mid', 'g-unseen'],
  );
  const byTask = new Map<string, TaskStats>([
    ['s-hi', stats(1)],
    ['s-lo', stats(0)],
    ['s-mid', stats(0.5)],
    ['g-hi', stats(0.96)],
    ['g-edge', stats(0.95)],
    ['g-lo', stats(0.1875)],
    ['g-floor', stats(0.2)],
    ['g-mid', stats(0.5)],
    ['not-in-pool', stats(1)],
  ]);

  it('retires generated tasks above retireMasteredAbove (mastered) and below burnInFloor once observed (burn-in)', () => {
    const d = retire(pool, byTask, 7, PAPER);
    expect(d.map((x) => [x.taskId, x.rule])).toEqual([
      ['g-hi', 'mastered'],
      ['g-lo', 'burn_in'],
    ]);
    expect(d[0]).toEqual({
      kind: 'retire',
      taskId: 'g-hi',
      rule: 'mastered',
      stats: byTask.get('g-hi'),
      step: 7,
      poolVersion: pool.version + 1,
    });
  });

  it('keeps human seeds unless retireSeeds, and never retires a seed in burn-in', () => {
    const d = retire(pool, byTask, 7, config({ pool: { retireSeeds: true } }));
    expect(d.map((x) => [x.taskId, x.rule])).toEqual([
      ['g-hi', 'mastered'],
      ['g-lo', 'burn_in'],
      ['s-hi', 'mastered'],
    ]);
  });

  it('reads the detector signal, not the all-rollout mean', () => {
    const p = poolWith(['s'], ['g1', 'g2']);
    const s = new Map([
      ['g1', stats(0.99, 3, { mean: 0.3, latestGroupMean: 0.3 })],
      ['g2', stats(0.5, 3, { mean: 0.99, latestGroupMean: 0.99 })],
    ]);
    expect(retire(p, s, 3, PAPER).map((x) => x.taskId)).toEqual(['g1']);
  });

  it('uses the thresholds of the config', () => {
    const cfg = config({
      detector: { high: 0.8, low: 0.3 },
      pool: { retireMasteredAbove: 0.9, burnInFloor: 0.3 },
    });
    const d = retire(pool, byTask, 7, cfg);
    expect(d.map((x) => [x.taskId, x.rule])).toEqual([
      ['g-edge', 'mastered'],
      ['g-floor', 'burn_in'],
      ['g-hi', 'mastered'],
      ['g-lo', 'burn_in'],
    ]);
  });

  it('falls back to the recorded stats of a member, and ignores tasks never observed', () => {
    const p = applyDecisions(pool, [{ kind: 'observe', taskId: 'g-unseen', stats: stats(0.05, 4) }]);
    expect(retire(p, undefined, 8, PAPER).map((x) => x.taskId)).toEqual(['g-unseen']);
    expect(retire(pool, undefined, 8, PAPER)).toEqual([]);
    expect(retire(pool, {}, 8, PAPER)).toEqual([]);
  });

  it('accepts a plain object of stats (own properties only)', () => {
    const p = poolWith(['s'], ['constructor', 'toString']);
    const s: Record<string, TaskStats> = { constructor: stats(0.99) };
    expect(retire(p, s, 1, PAPER).map((x) => x.taskId)).toEqual(['constructor']);
  });

  it('is one change set: the version goes up once however many tasks retire', () => {
    const d = retire(pool, byTask, 7, PAPER);
    const after = applyDecisions(pool, d);
    expect(after.version).toBe(pool.version + 1);
    expect(after.members.map((m) => m.taskId)).not.toContain('g-hi');
    expect(after.members.map((m) => m.taskId)).not.toContain('g-lo');
    expect(after.members).toHaveLength(pool.members.length - 2);
  });

  it('returns nothing for an empty pool', () => {
    expect(retire(EMPTY_POOL, byTask, 1, PAPER)).toEqual([]);
  });

  it('retires any task manually, with its last stats, and refuses a task not in the pool', () => {
    const p = applyDecisions(pool, [{ kind: 'observe', taskId: 's-mid', stats: stats(0.5, 2) }]);
    expect(manualRetirement(p, 's-mid', 9)).toEqual({
      kind: 'retire',
      taskId: 's-mid',
      rule: 'manual',
      stats: stats(0.5, 2),
      step: 9,
      poolVersion: p.version + 1,
    });
    expect(manualRetirement(p, 'g-unseen', 9).stats).toBeNull();
    expect(() => manualRetirement(p, 'nope', 9)).toThrow(PoolDecisionError);
  });
});

describe('seed selection that sees variance', () => {
  const pool = () =>
    seeded([
      ['flat-half', 'base'],
      ['spread-third', 'base'],
      ['spread-quarter', 'base'],
    ]);
  // flat-half: mean 0.5 (φ = 1) but every rollout of its latest group scored alike.
  const s = new Map([
    ['flat-half', stats(0.5, 9, { latestGroupVariance: 0 })],
    ['spread-third', stats(0.3, 9, { latestGroupVariance: 0.2 })],
    ['spread-quarter', stats(0.25, 9, { latestGroupVariance: 0.05 })],
  ]);
  const base = { perCategoryQuota: { base: 8 } };

  it('skips a seed whose latest group was flat by default, whatever its φ', () => {
    const d = selectSeeds(pool(), s, 10, config({ selection: base }));
    expect(d.map((x) => x.taskId)).toEqual(['spread-third', 'spread-quarter']);
  });

  it('ranks by the measured variance with `rank`, recording φ as before', () => {
    const d = selectSeeds(pool(), s, 10, config({ selection: { ...base, varianceGuard: 'rank' } }));
    expect(d.map((x) => x.taskId)).toEqual(['spread-third', 'spread-quarter', 'flat-half']);
    expect(d.map((x) => x.phi)).toEqual([0.84, 0.75, 1].map((v) => expect.closeTo(v, 12)));
  });

  it("is the paper's pure φ ranking with `off`", () => {
    const d = selectSeeds(pool(), s, 10, config({ selection: { ...base, varianceGuard: 'off' } }));
    expect(d.map((x) => x.taskId)).toEqual(['flat-half', 'spread-third', 'spread-quarter']);
  });

  it('calls a group flat up to minGroupVariance', () => {
    const d = selectSeeds(pool(), s, 10, config({ selection: { ...base, minGroupVariance: 0.05 } }));
    expect(d.map((x) => x.taskId)).toEqual(['spread-third']);
  });

  it('waits for minGroups reward groups before a task may be a seed', () => {
    const one = new Map([
      ['spread-third', statsOf(0.3, { groups: 1, lastStep: 1 }, { latestGroupVariance: 0.2 })],
    ]);
    expect(selectSeeds(pool(), one, 2, config({ selection: base }))).toEqual([]);
    const d = selectSeeds(pool(), one, 2, config({ selection: { ...base, minGroups: 1 } }));
    expect(d.map((x) => x.taskId)).toEqual(['spread-third']);
  });

  it('does not select on statistics older than maxStaleSteps (0: never stale)', () => {
    expect(selectSeeds(pool(), s, 30, config({ selection: base })).map((x) => x.taskId)).toEqual([]);
    expect(selectSeeds(pool(), s, 29, config({ selection: base })).map((x) => x.taskId)).toEqual([
      'spread-third',
      'spread-quarter',
    ]);
    const never = config({ selection: { ...base, maxStaleSteps: 0 } });
    expect(selectSeeds(pool(), s, 500, never).map((x) => x.taskId)).toEqual([
      'spread-third',
      'spread-quarter',
    ]);
  });

  it('names why a task is not eligible', () => {
    const sel = config({}).selection;
    expect(seedIneligibility(statsOf(0.5, { groups: 1 }), 1, sel)).toBe('1 of 2 reward groups');
    expect(seedIneligibility(statsOf(0.5, { lastStep: 1 }), 22, sel)).toBe(
      'statistics from step 1, older than 20 steps',
    );
    expect(seedIneligibility(statsOf(0.5, {}, { latestGroupVariance: 0 }), 2, sel)).toBe(
      'latest group variance 0 <= 0.001 (no gradient)',
    );
    expect(seedIneligibility(statsOf(0.5), 2, sel)).toBeUndefined();
  });

  it('refuses out-of-range knobs with the field named', () => {
    expect(() => config({ selection: { minGroupVariance: 0.3 } })).toThrow(/selection.minGroupVariance/);
    expect(() => config({ selection: { minGroups: 0 } })).toThrow(/selection.minGroups/);
    expect(() => config({ selection: { varianceGuard: 'sometimes' as 'off' } })).toThrow(/varianceGuard/);
  });
});

describe('selectSeeds', () => {
  const cats = (n: number, category: string, prefix: string) =>
    Array.from({ length: n }, (_, i) => [`${prefix}${i}`, category] as [string, string]);

  it('selects only boundary tasks, ranked by φ, ties by task id', () => {
    const p = seeded([
      ['hard', 'base'],
      ['mastered', 'base'],
      ['b-quarter', 'base'],
      ['a-three-quarters', 'base'],
      ['half', 'base'],
      ['unseen', 'base'],
    ]);
    const s = new Map([
      ['hard', stats(0.1)],
      ['mastered', stats(0.9)],
      ['b-quarter', stats(0.25)],
      ['a-three-quarters', stats(0.75)],
      ['half', stats(0.5)],
    ]);
    const d = selectSeeds(p, s, 3, config({ selection: { perCategoryQuota: { base: 8 } } }));
    expect(d.map((x) => x.taskId)).toEqual(['half', 'a-three-quarters', 'b-quarter']);
    expect(d.map((x) => x.phi)).toEqual([1, 0.75, 0.75]);
    expect(d.map((x) => x.quotaSlot)).toEqual([0, 1, 2]);
    expect(d.map((x) => x.rank)).toEqual([0, 1, 2]);
    expect(d[0]).toEqual({
      kind: 'select',
      taskId: 'half',
      category: 'base',
      step: 3,
      phi: 1,
      quotaSlot: 0,
      rank: 0,
      stats: s.get('half'),
      rootSeedId: 'half',
      depth: 0,
    });
  });

  it('includes both band edges and recomputes the band from the signal with the config thresholds', () => {
    const p = seeded([
      ['low-edge', 'base'],
      ['high-edge', 'base'],
      ['stale-band', 'base'],
    ]);
    const s = new Map([
      ['low-edge', stats(0.2)],
      ['high-edge', stats(0.85)],
      ['stale-band', stats(0.5, 1, { band: 'hard' })],
    ]);
    const cfg = config({ selection: { perCategoryQuota: { base: 8 } } });
    expect(
      selectSeeds(p, s, 1, cfg)
        .map((x) => x.taskId)
        .sort(),
    ).toEqual(['high-edge', 'low-edge', 'stale-band']);
    const narrow = config({
      detector: { low: 0.3, high: 0.6 },
      pool: { burnInFloor: 0.2 },
      selection: { perCategoryQuota: { base: 8 } },
    });
    expect(selectSeeds(p, s, 1, narrow).map((x) => x.taskId)).toEqual(['stale-band']);
  });

  it('fills each category up to its quota, slots counted from 0 per category; unused quota does not move', () => {
    const p = seeded([...cats(5, 'base', 'b'), ...cats(3, 'miss_func', 'f'), ...cats(2, 'weird', 'w')]);
    const s = new Map<string, TaskStats>();
    for (const m of p.members) s.set(m.taskId, stats(0.5));
    s.set('f2', stats(0.55)); // slightly lower φ than the others
    const d = selectSeeds(p, s, 1, PAPER);
    // paper quotas: 2 per BFCL category; 'weird' has no quota; miss_param/long_context have no boundary task
    expect(d.map((x) => [x.taskId, x.category, x.quotaSlot])).toEqual([
      ['b0', 'base', 0],
      ['b1', 'base', 1],
      ['f0', 'miss_func', 0],
      ['f1', 'miss_func', 1],
    ]);
  });

  it('skips a category whose quota is full and takes a lower-φ task of another', () => {
    const p = seeded([
      ['a1', 'base'],
      ['a2', 'base'],
      ['z', 'miss_param'],
    ]);
    const s = new Map([
      ['a1', stats(0.5)],
      ['a2', stats(0.5)],
      ['z', stats(0.25)],
    ]);
    const d = selectSeeds(p, s, 1, config({ selection: { perCategoryQuota: { base: 1, miss_param: 1 } } }));
    expect(d.map((x) => x.taskId)).toEqual(['a1', 'z']);
  });

  it('stops at the budget M and at the free synthesis slots', () => {
    const p = seeded(cats(6, 'base', 'b'));
    const s = new Map(p.members.map((m) => [m.taskId, stats(0.5)]));
    const cfg = config({
      selection: { budgetPerStep: 6, perCategoryQuota: { base: 6 }, maxConcurrentSyntheses: 10 },
    });
    expect(selectSeeds(p, s, 1, cfg)).toHaveLength(6);
    const tight = config({
      selection: { budgetPerStep: 6, perCategoryQuota: { base: 6 }, maxConcurrentSyntheses: 3 },
    });
    expect(selectSeeds(p, s, 1, tight)).toHaveLength(3);
    expect(selectSeeds(p, s, 1, tight, { runningSyntheses: 2 }).map((x) => x.taskId)).toEqual(['b0']);
    expect(selectSeeds(p, s, 1, tight, { runningSyntheses: 5 })).toEqual([]);
    // tasks in flight are skipped and count as running
    expect(selectSeeds(p, s, 1, tight, { inFlight: ['b0'] }).map((x) => x.taskId)).toEqual(['b1', 'b2']);
    const none = config({ selection: { budgetPerStep: 0, perCategoryQuota: {} } });
    expect(selectSeeds(p, s, 1, none)).toEqual([]);
  });

  it('respects the cooldown: selected at step s, eligible again from s + c + 1', () => {
    let p = seeded([['a', 'base']]);
    const s = new Map([['a', stats(0.5)]]);
    const cfg = config({ selection: { cooldownSteps: 5 } });
    const first = selectSeeds(p, s, 10, cfg);
    expect(first.map((x) => x.taskId)).toEqual(['a']);
    p = applyDecisions(p, first);
    expect(findMember(p, 'a')!.lastSelectedStep).toBe(10);
    for (const step of [10, 11, 15]) expect(selectSeeds(p, s, step, cfg)).toEqual([]);
    expect(selectSeeds(p, s, 16, cfg).map((x) => x.taskId)).toEqual(['a']);
    const noCooldown = config({ selection: { cooldownSteps: 0 } });
    expect(selectSeeds(p, s, 10, noCooldown)).toEqual([]); // never twice in one step
    expect(selectSeeds(p, s, 11, noCooldown).map((x) => x.taskId)).toEqual(['a']);
  });

  it('selects generated tasks too, carrying their lineage', () => {
    const p = poolWith(['s'], ['g']);
    const d = selectSeeds(p, new Map([['g', stats(0.5)]]), 4, PAPER);
    expect(d[0]).toMatchObject({ taskId: 'g', rootSeedId: 's', depth: 1 });
  });

  it('returns nothing for an empty pool or without statistics', () => {
    expect(selectSeeds(EMPTY_POOL, new Map(), 1, PAPER)).toEqual([]);
    expect(selectSeeds(seeded([['a', 'base']]), undefined, 1, PAPER)).toEqual([]);
  });
});

describe('planInjection', () => {
  it('plans nothing off the injection boundary', () => {
    let p = seeded([['s1', 'base']]);
    p = applyDecisions(p, [{ kind: 'enqueue', candidate: queued('c1') }]);
    for (const step of [0, 1, 9, 11, 19]) {
      const plan = planInjection(p, step, PAPER);
      expect(plan).toMatchObject({
        boundary: false,
        inject: [],
        prune: [],
        discard: [],
        newVersion: p.version,
      });
    }
    expect(planInjection(p, 10, PAPER).boundary).toBe(true);
    expect(planInjection(p, 20, PAPER).boundary).toBe(true);
    const every3 = config({ pool: { injectionCadence: 'steps:3' } });
    expect([3, 4, 6, 10].map((s) => planInjection(p, s, every3).boundary)).toEqual([
      true,
      false,
      true,
      false,
    ]);
    const epoch4 = config({ pool: { epochSteps: 4 } });
    expect([4, 8, 10].map((s) => planInjection(p, s, epoch4).boundary)).toEqual([true, true, false]);
  });

  it('caps an injection at floor(β × active pool), at least 1, at most the queue and P_max', () => {
    expect(injectionCap(800, 0.2, 1000, 400)).toBe(160);
    expect(injectionCap(100, 0.29, 1000, 400)).toBe(29); // 0.29 × 100 = 28.999999999999996 in binary
    expect(injectionCap(100, 0.57, 1000, 400)).toBe(57);
    expect(injectionCap(14, 0.2, 1000, 400)).toBe(2);
    expect(injectionCap(4, 0.2, 1000, 400)).toBe(1); // floor(0.8) = 0, but at least 1
    expect(injectionCap(0, 0.2, 3, 400)).toBe(1); // an empty pool still gets started
    expect(injectionCap(800, 0.2, 7, 400)).toBe(7);
    expect(injectionCap(800, 0.2, 0, 400)).toBe(0);
    expect(injectionCap(800, 1, 1000, 400)).toBe(400);
    expect(injectionCap(800, 0.2, 1000, 0)).toBe(0);
  });

  it('injects the queue in FIFO order (step queued, then higher parent φ, then candidate id)', () => {
    const seeds = Array.from({ length: 10 }, (_, i) => `s${i}`);
    let p = seeded(seeds.map((s) => [s, 'base']));
    const q = [
      queued('late', { queuedAtStep: 5 }),
      queued('early-b', { queuedAtStep: 2, parentPhi: 0.5 }),
      queued('early-a', { queuedAtStep: 2, parentPhi: 0.5 }),
      queued('early-hi', { queuedAtStep: 2, parentPhi: 0.9 }),
      queued('first', { queuedAtStep: 1, parentPhi: 0.1 }),
    ];
    p = applyDecisions(
      p,
      q.map((candidate) => ({ kind: 'enqueue', candidate })),
    );
    expect(p.queue.map((x) => x.candidateId)).toEqual(['first', 'early-hi', 'early-a', 'early-b', 'late']);
    const plan = planInjection(p, 10, config({ pool: { injectionShare: 0.3 } })); // floor(0.3 × 10) = 3
    expect(plan.injectionCap).toBe(3);
    expect(plan.inject.map((x) => x.candidateId)).toEqual(['first', 'early-hi', 'early-a']);
    expect(plan.inject[0]).toEqual({
      kind: 'inject',
      candidateId: 'first',
      taskId: 't-first',
      category: 'base',
      parents: ['s1'],
      rootSeedId: 's1',
      depth: 1,
      parentPhi: 0.1,
      step: 10,
      poolVersion: p.version + 1,
    });
    expect(plan.newVersion).toBe(p.version + 1);
    const after = applyDecisions(p, planDecisions(plan));
    expect(after.version).toBe(p.version + 1);
    expect(after.queue.map((x) => x.candidateId)).toEqual(['early-b', 'late']);
    expect(generatedCount(after)).toBe(3);
    expect(findMember(after, 't-first')).toMatchObject({
      origin: 'generated',
      injectedAtStep: 10,
      parentPhi: 0.1,
    });
  });

  it('discards queued candidates whose task id is already in the pool or earlier in the queue', () => {
    let p = poolWith(['s1'], ['g']);
    p = applyDecisions(p, [
      { kind: 'enqueue', candidate: queued('c1', { taskId: 'dup' }) },
      { kind: 'enqueue', candidate: queued('c2', { taskId: 'dup' }) },
    ]);
    // an enqueue of a task that is already a member is a no-op, so plant one directly
    p = { ...p, queue: [...p.queue, queued('c0', { taskId: 'g', queuedAtStep: 0 })].sort(compareQueued) };
    const plan = planInjection(p, 10, config({ pool: { injectionShare: 1 } }));
    expect(plan.inject.map((x) => x.candidateId)).toEqual(['c1']);
    expect(plan.discard.map((x) => [x.candidateId, x.reason])).toEqual([
      ['c0', 'duplicate-task'],
      ['c2', 'duplicate-task'],
    ]);
    const after = applyDecisions(p, planDecisions(plan));
    expect(after.queue).toEqual([]);
  });

  it('prunes generated tasks over P_max, lowest φ first, ties by task id; never seeds', () => {
    const p = poolWith(['s1', 's2'], ['g-a', 'g-b', 'g-c', 'g-d', 'g-e']);
    const phis = new Map([
      ['g-a', 0.5],
      ['g-b', 0.3],
      ['g-c', 0.3],
      ['g-d', 0.9],
      ['g-e', 0.1],
      ['s1', 0],
      ['s2', 0],
    ]);
    const plan = planInjection(p, 10, config({ pool: { generatedCap: 2 } }), phis);
    expect(plan.inject).toEqual([]);
    expect(plan.generatedBefore).toBe(5);
    expect(plan.generatedCap).toBe(2);
    expect(plan.prune.map((x) => [x.taskId, x.phi, x.observed])).toEqual([
      ['g-e', 0.1, true],
      ['g-b', 0.3, true],
      ['g-c', 0.3, true],
    ]);
    expect(new Set(plan.prune.map((x) => x.poolVersion))).toEqual(new Set([p.version + 1]));
    const after = applyDecisions(p, planDecisions(plan));
    expect(after.members.map((m) => m.taskId)).toEqual(['g-a', 'g-d', 's1', 's2']);
    expect(after.version).toBe(p.version + 1);
    // P_max 0 removes every generated task and no seed
    const zero = planInjection(p, 10, config({ pool: { generatedCap: 0 } }), phis);
    expect(zero.prune).toHaveLength(5);
    expect(applyDecisions(p, planDecisions(zero)).members.map((m) => m.taskId)).toEqual(['s1', 's2']);
  });

  it('ranks unobserved tasks after all observed ones: oldest first, then lower parent φ, then id', () => {
    let p = poolWith(['s1'], ['obs-hi', 'obs-lo', 'old-unseen']); // injected at step 0, parent φ 0.5
    const later = (id: string, parentPhi: number): InjectDecision => ({
      kind: 'inject',
      candidateId: `c-${id}`,
      taskId: id,
      category: 'base',
      parents: ['s1'],
      rootSeedId: 's1',
      depth: 1,
      parentPhi,
      step: 5,
      poolVersion: p.version + 1,
    });
    p = applyDecisions(p, [later('new-b', 0.4), later('new-a', 0.4), later('new-c', 0.3)]);
    p = applyDecisions(p, [
      { kind: 'observe', taskId: 'obs-hi', stats: stats(0.5) },
      { kind: 'observe', taskId: 'obs-lo', stats: stats(0.25) },
    ]);
    const plan = planInjection(p, 10, config({ pool: { generatedCap: 1 } }));
    expect(plan.prune.map((x) => [x.taskId, x.phi, x.observed])).toEqual([
      ['obs-lo', 0.75, true],
      ['obs-hi', 1, true],
      ['old-unseen', 0.5, false],
      ['new-c', 0.3, false],
      ['new-a', 0.4, false],
    ]);
  });

  it('injects before pruning, never more than P_max, and never prunes what it just injected', () => {
    let p = poolWith(['s1', 's2', 's3', 's4', 's5'], ['g1', 'g2', 'g3']);
    p = applyDecisions(p, [
      { kind: 'observe', taskId: 'g1', stats: stats(0.5) },
      { kind: 'observe', taskId: 'g2', stats: stats(0.25) },
      { kind: 'observe', taskId: 'g3', stats: stats(0.3) },
      { kind: 'enqueue', candidate: queued('n1', { parentPhi: 0.01 }) },
      { kind: 'enqueue', candidate: queued('n2', { parentPhi: 0.02 }) },
    ]);
    const cfg = config({ pool: { generatedCap: 3, injectionShare: 0.25 } }); // floor(0.25 × 8) = 2
    const plan = planInjection(p, 10, cfg);
    expect(plan.inject.map((x) => x.taskId)).toEqual(['t-n2', 't-n1']);
    expect(plan.generatedBefore).toBe(5);
    expect(plan.prune.map((x) => x.taskId)).toEqual(['g2', 'g3']);
    const after = applyDecisions(p, planDecisions(plan));
    expect(generatedCount(after)).toBe(3);
    expect(after.version).toBe(p.version + 1);
    // with a cap below the injection size, injection is limited to the cap
    const tiny = planInjection(p, 10, config({ pool: { generatedCap: 1, injectionShare: 0.25 } }));
    expect(tiny.inject.map((x) => x.taskId)).toEqual(['t-n2']);
    expect(tiny.prune.map((x) => x.taskId)).toEqual(['g2', 'g3', 'g1']);
    const none = planInjection(p, 10, config({ pool: { generatedCap: 0 } }));
    expect(none.inject).toEqual([]);
  });

  it('prefers the φ passed in over the recorded stats', () => {
    let p = poolWith(['s1'], ['g1', 'g2']);
    p = applyDecisions(p, [
      { kind: 'observe', taskId: 'g1', stats: stats(0.5) },
      { kind: 'observe', taskId: 'g2', stats: stats(0.25) },
    ]);
    const cfg = config({ pool: { generatedCap: 1 } });
    expect(planInjection(p, 10, cfg).prune.map((x) => x.taskId)).toEqual(['g2']);
    expect(planInjection(p, 10, cfg, { g1: 0.1 }).prune.map((x) => x.taskId)).toEqual(['g1']);
  });

  it('leaves the version alone when the boundary brings no change', () => {
    const p = poolWith(['s1'], ['g1']);
    const plan = planInjection(p, 10, PAPER);
    expect(plan).toMatchObject({ boundary: true, inject: [], prune: [], newVersion: p.version });
    expect(applyDecisions(p, planDecisions(plan))).toEqual(p);
  });

  it('handles an empty pool', () => {
    expect(planInjection(EMPTY_POOL, 10, PAPER)).toMatchObject({
      boundary: true,
      inject: [],
      prune: [],
      newVersion: 0,
    });
    const p = applyDecisions(EMPTY_POOL, [{ kind: 'enqueue', candidate: queued('c1') }]);
    const plan = planInjection(p, 10, PAPER);
    expect(plan.inject).toHaveLength(1);
    expect(applyDecisions(p, planDecisions(plan)).version).toBe(1);
  });
});

describe('applyDecisions', () => {
  function deepFreeze<T>(v: T): T {
    if (v && typeof v === 'object') {
      for (const x of Object.values(v)) deepFreeze(x);
      Object.freeze(v);
    }
    return v;
  }

  it('never modifies its input', () => {
    const p = deepFreeze(poolWith(['s1', 's2'], ['g1']));
    const ds: PoolDecision[] = deepFreeze([
      { kind: 'observe', taskId: 'g1', stats: stats(0.99) },
      {
        kind: 'select',
        taskId: 's1',
        category: 'base',
        step: 2,
        phi: 1,
        quotaSlot: 0,
        rank: 0,
        stats: stats(0.5),
        rootSeedId: 's1',
        depth: 0,
      },
      { kind: 'enqueue', candidate: queued('c9') },
      {
        kind: 'retire',
        taskId: 'g1',
        rule: 'mastered',
        stats: stats(0.99),
        step: 2,
        poolVersion: p.version + 1,
      },
    ]);
    const copy = structuredClone(p);
    const after = applyDecisions(p, ds);
    expect(p).toEqual(copy);
    expect(after.members.map((m) => m.taskId)).toEqual(['s1', 's2']);
    expect(findMember(after, 's1')!.lastSelectedStep).toBe(2);
    expect(after.queue.map((q) => q.candidateId)).toEqual(['c9']);
  });

  it('records the first observation step once and the latest stats always', () => {
    let p = poolWith(['s1'], ['g1']);
    p = applyDecisions(p, [{ kind: 'observe', taskId: 'g1', stats: stats(0.5, 4) }]);
    p = applyDecisions(p, [{ kind: 'observe', taskId: 'g1', stats: stats(0.75, 6) }]);
    expect(findMember(p, 'g1')).toMatchObject({ firstObservedStep: 4, lastStats: stats(0.75, 6) });
    // observations of tasks outside the pool change nothing
    expect(applyDecisions(p, [{ kind: 'observe', taskId: 'gone', stats: stats(0.5) }])).toEqual(p);
  });

  it('refuses a decision that skips a version, a stale change, and pruning a seed', () => {
    const p = poolWith(['s1'], ['g1']); // version 2
    expect(() =>
      applyDecisions(p, [
        { kind: 'retire', taskId: 'g1', rule: 'manual', stats: null, step: 1, poolVersion: 4 },
      ]),
    ).toThrow(/a change set is missing/);
    expect(() =>
      applyDecisions(p, [
        { kind: 'retire', taskId: 'g1', rule: 'manual', stats: null, step: 1, poolVersion: 1 },
      ]),
    ).toThrow(/would change the pool at version 2/);
    expect(() =>
      applyDecisions(p, [{ kind: 'prune', taskId: 's1', phi: 0, observed: true, step: 1, poolVersion: 3 }]),
    ).toThrow(/human seeds are never pruned/);
    expect(() =>
      applyDecisions(p, [{ kind: 'seed', taskId: 'g1', category: 'base', step: 1, poolVersion: 3 }]),
    ).toThrow(/generated task/);
    expect(() =>
      applyDecisions(p, [
        {
          kind: 'inject',
          candidateId: 'x',
          taskId: 'x',
          category: 'base',
          parents: [],
          rootSeedId: 'x',
          depth: 1,
          parentPhi: 0,
          step: 1,
          poolVersion: 3,
        },
      ]),
    ).toThrow(/needs its parents/);
    expect(() =>
      applyDecisions(p, [{ kind: 'seed', taskId: 'n', category: 'base', step: 1, poolVersion: 2.5 }]),
    ).toThrow(/not an integer/);
  });

  it('folds hostile task ids as plain data', () => {
    const ids = ['__proto__', 'constructor', 'hasOwnProperty', ''];
    let p = seeded(ids.map((id) => [id, 'base']));
    expect(p.members.map((m) => m.taskId)).toEqual(['', '__proto__', 'constructor', 'hasOwnProperty']);
    const s = Object.fromEntries(ids.map((id) => [id, stats(0.5)])) as Record<string, TaskStats>;
    expect(Object.keys(s)).toContain('__proto__');
    const d = selectSeeds(p, s, 1, config({ selection: { perCategoryQuota: { base: 8 } } }));
    expect(d.map((x) => x.taskId)).toEqual(['', '__proto__', 'constructor', 'hasOwnProperty']);
    p = applyDecisions(p, d);
    p = applyDecisions(p, [manualRetirement(p, '__proto__', 2)]);
    expect(p.members.map((m) => m.taskId)).toEqual(['', 'constructor', 'hasOwnProperty']);
    expect(JSON.parse(JSON.stringify(p))).toEqual(p);
  });

  // A seeded PRNG for the property test (Math.random would make failures irreproducible).
  function mulberry32(seed: number): () => number {
    let a = seed >>> 0;
    return () => {
      a = (a + 0x6d2b79f5) >>> 0;
      let t = a;
      t = Math.imul(t ^ (t >>> 15), t | 1);
      t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
      return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
    };
  }

  /** A campaign of `steps` steps driven by the policy itself, with random statistics and synthesis outcomes. */
  function simulate(
    seed: number,
    steps: number,
  ): { start: PoolState; decisions: PoolDecision[]; end: PoolState } {
    const rnd = mulberry32(seed);
    const categories = ['base', 'miss_func', 'miss_param', 'long_context'];
    const cfg = config({
      pool: { generatedCap: 12, injectionShare: 0.25, epochSteps: 3 },
      selection: { cooldownSteps: 2, budgetPerStep: 8, maxConcurrentSyntheses: 6 },
    });
    const start = seeded(
      Array.from({ length: 16 }, (_, i) => [`seed-${i}`, categories[i % 4]!] as [string, string]),
    );
    let p = start;
    const decisions: PoolDecision[] = [];
    const fold = (ds: PoolDecision[]) => {
      decisions.push(...ds);
      p = applyDecisions(p, ds);
    };
    let next = 0;
    for (let step = 1; step <= steps; step++) {
      const observed: PoolDecision[] = [];
      for (const m of p.members) {
        if (rnd() < 0.7)
          observed.push({
            kind: 'observe',
            taskId: m.taskId,
            stats: stats(Math.floor(rnd() * 17) / 16, step),
          });
      }
      fold(observed);
      fold(retire(p, undefined, step, cfg));
      const selected = selectSeeds(p, undefined, step, cfg);
      fold(selected);
      for (const sel of selected) {
        if (rnd() < 0.6) {
          const id = `gen-${next++}`;
          fold([
            queueCandidate(
              p,
              {
                candidateId: `cand-${id}`,
                taskId: rnd() < 0.05 ? 'seed-0' : id,
                category: sel.category,
                parents: [sel.taskId],
                parentPhi: sel.phi,
              },
              step,
              (t) => (t === sel.taskId ? { rootSeedId: sel.rootSeedId, depth: sel.depth } : undefined),
            ),
          ]);
        }
      }
      fold(planDecisions(planInjection(p, step, cfg)));
      if (rnd() < 0.05 && p.members.length > 0) {
        fold([manualRetirement(p, p.members[Math.floor(rnd() * p.members.length)]!.taskId, step)]);
      }
    }
    return { start, decisions, end: p };
  }

  it('property: the same decisions from the same pool give the same pool, at any grouping; a re-delivered change set changes nothing', () => {
    const kinds = new Map<string, number>();
    const rules = new Set<string>();
    for (let seed = 1; seed <= 25; seed++) {
      const { start, decisions, end } = simulate(seed, 40);
      expect(decisions.length).toBeGreaterThan(100);
      for (const d of decisions) {
        kinds.set(d.kind, (kinds.get(d.kind) ?? 0) + 1);
        if (d.kind === 'retire') rules.add(d.rule);
      }
      const once = applyDecisions(start, decisions);
      const twice = applyDecisions(start, decisions);
      expect(twice).toEqual(once);
      expect(once).toEqual(end);
      // replay one event at a time (as a projection folds the event stream)
      let byOne = start;
      for (const d of decisions) byOne = applyDecisions(byOne, [d]);
      expect(byOne).toEqual(once);
      // a change set delivered again changes nothing
      const lastSet = decisions.filter((d) => 'poolVersion' in d && d.poolVersion === once.version);
      expect(lastSet.length).toBeGreaterThan(0);
      expect(applyDecisions(once, lastSet)).toEqual(once);
      // plain JSON: the state survives a payload round trip unchanged
      const roundTrip = JSON.parse(JSON.stringify(decisions)) as PoolDecision[];
      expect(applyDecisions(JSON.parse(JSON.stringify(start)), roundTrip)).toEqual(once);
    }
    // the simulated histories exercise every kind of decision and every retirement rule
    expect([...kinds.keys()].sort()).toEqual([
      'discard',
      'enqueue',
      'inject',
      'observe',
      'prune',
      'retire',
      'select',
    ]);
    expect([...rules].sort()).toEqual(['burn_in', 'manual', 'mastered']);
  });

  it('property: invariants hold after every decision of a simulated campaign', () => {
    const violations: string[] = [];
    const violated = (seed: number, i: number, what: string) => {
      if (violations.length < 10) violations.push(`seed ${seed}, decision ${i}: ${what}`);
    };
    for (let seed = 100; seed < 110; seed++) {
      const { start, decisions } = simulate(seed, 40);
      let p = start;
      decisions.forEach((d, i) => {
        const before = p.version;
        p = applyDecisions(p, [d]);
        if (p.version !== before && p.version !== before + 1)
          violated(seed, i, `version ${before} -> ${p.version}`);
        for (let k = 1; k < p.members.length; k++) {
          if (!(p.members[k - 1]!.taskId < p.members[k]!.taskId))
            violated(seed, i, 'members not sorted and unique');
        }
        for (const m of p.members) {
          const ok =
            m.origin === 'seed'
              ? m.rootSeedId === m.taskId && m.depth === 0 && m.parents.length === 0
              : m.rootSeedId.startsWith('seed-') && m.depth >= 1 && m.parents.length >= 1;
          if (!ok) violated(seed, i, `bad lineage of ${m.taskId}`);
        }
        // injection happens only together with pruning down to P_max, prunes first
        if (generatedCount(p) > 12) violated(seed, i, `${generatedCount(p)} generated tasks over P_max`);
        for (let k = 1; k < p.queue.length; k++) {
          if (compareQueued(p.queue[k - 1]!, p.queue[k]!) >= 0) violated(seed, i, 'queue out of order');
        }
      });
    }
    expect(violations).toEqual([]);
  });
});

describe('selection that learns from outcomes (selection.rejectionBackoff)', () => {
  const pool = () => {
    // both seeds last selected at step 4 (cooldown 5 is over by step 10)
    const p = seeded([
      ['barren', 'base'],
      ['fertile', 'base'],
    ]);
    return {
      ...p,
      members: p.members.map((m) => ({ ...m, lastSelectedStep: 4 })),
    };
  };
  const s = new Map([
    ['barren', stats(0.5, 9)],
    ['fertile', stats(0.4, 9)],
  ]);
  const streaks = {
    barren: { count: 3, reasons: ['duplicate-candidate', 'near-duplicate', 'near-duplicate'] },
  };
  const cfg = config({ selection: { perCategoryQuota: { base: 8 } } });

  it('passes over a seed whose last 3 children were rejected until 10 steps after its selection, saying why', () => {
    const passedOver: { taskId: string; reason: string }[] = [];
    const d = selectSeeds(pool(), s, 14, cfg, { rejectionStreaks: streaks, passedOver });
    expect(d.map((x) => x.taskId)).toEqual(['fertile']);
    expect(passedOver).toEqual([
      {
        taskId: 'barren',
        reason:
          'its last 3 children were rejected (duplicate-candidate, near-duplicate); passed over until step 15',
      },
    ]);
    expect(selectSeeds(pool(), s, 15, cfg, { rejectionStreaks: streaks }).map((x) => x.taskId)).toEqual([
      'barren',
      'fertile',
    ]);
  });

  it('needs the whole streak, and is off with streak 0 (the paper)', () => {
    const short = { barren: { count: 2, reasons: ['near-duplicate', 'near-duplicate'] } };
    expect(selectSeeds(pool(), s, 14, cfg, { rejectionStreaks: short }).map((x) => x.taskId)).toEqual([
      'barren',
      'fertile',
    ]);
    const paper = config({ selection: { perCategoryQuota: { base: 8 }, rejectionBackoff: { streak: 0 } } });
    expect(selectSeeds(pool(), s, 14, paper, { rejectionStreaks: streaks }).map((x) => x.taskId)).toEqual([
      'barren',
      'fertile',
    ]);
  });
});
