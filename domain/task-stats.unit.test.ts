import { describe, expect, it } from 'vitest';
import { bandOf, DetectorConfigSchema, PAPER_DETECTOR, parseWindow, phi, windowSpec } from './band.js';
import { checkGroup, DEFAULT_REWARD_LIMITS } from './reward-group.js';
import { addToTally, bandSummary, boundaryVarianceRatio, emptyTally } from './step-tally.js';
import {
  applyGroup,
  StepStatsColumnsError,
  statsOfStepEntry,
  statsRecord,
  stepStatsColumns,
  stepStatsEntries,
  type TaskState,
} from './task-stats.js';

const group = (ones: number, k = 16) => Array.from({ length: k }, (_, i) => (i < ones ? 1 : 0));

describe('band detector', () => {
  it("uses the paper's thresholds: hard < 0.20 <= boundary <= 0.85 < mastered", () => {
    expect(bandOf(0.1999, PAPER_DETECTOR)).toBe('hard');
    expect(bandOf(0.2, PAPER_DETECTOR)).toBe('boundary');
    expect(bandOf(0.85, PAPER_DETECTOR)).toBe('boundary');
    expect(bandOf(0.8501, PAPER_DETECTOR)).toBe('mastered');
    expect(phi(0.5)).toBe(1);
    expect(phi(0)).toBe(0);
    expect(phi(0.25)).toBe(0.75);
  });

  it('parses windows and rejects bad configs with a message', () => {
    expect(parseWindow('latest')).toEqual({ kind: 'latest' });
    expect(parseWindow('ewma:0.3')).toEqual({ kind: 'ewma', alpha: 0.3 });
    expect(parseWindow('last:4')).toEqual({ kind: 'last', k: 4 });
    expect(windowSpec(parseWindow('last:4'))).toBe('last:4');
    expect(() => parseWindow('ewma:0')).toThrow(/alpha/);
    expect(() => parseWindow('median')).toThrow(/expected latest/);
    const bad = DetectorConfigSchema.safeParse({ low: 0.9, high: 0.1 });
    expect(bad.success).toBe(false);
    expect(JSON.stringify(bad.error?.issues)).toMatch(/low must not exceed high/);
    expect(DetectorConfigSchema.parse({})).toEqual({ ...PAPER_DETECTOR });
  });
});

describe('applyGroup', () => {
  it('tracks groups, rollouts, the latest group, the band and band changes', () => {
    let s: TaskState | undefined;
    const first = applyGroup(s, group(2), 1, PAPER_DETECTOR); // mean 0.125: hard
    expect(first.bandChange).toEqual({ from: null, to: 'hard' });
    s = first.state;
    const second = applyGroup(s, group(8), 2, PAPER_DETECTOR); // mean 0.5: boundary
    expect(second.bandChange).toEqual({ from: 'hard', to: 'boundary' });
    expect(second.state.groups).toBe(2);
    expect(second.state.moments.n).toBe(32);
    expect(second.state.moments.mean).toBeCloseTo(10 / 32, 15);
    expect(second.state.latestMean).toBe(0.5);
    expect(second.state.latestVariance).toBeCloseTo(0.25, 15);
    expect(second.state.phi).toBe(1);
    const third = applyGroup(second.state, group(9), 3, PAPER_DETECTOR);
    expect(third.bandChange).toBeNull();
    const r = statsRecord(third.state);
    expect(r).toMatchObject({ groupCount: 3, count: 48, band: 'boundary', lastStep: 3 });
    expect(r.variance).toBeCloseTo(r.m2 / 48, 15);
  });

  it('EWMA and last-k windows change which band a task is in', () => {
    const ewma = DetectorConfigSchema.parse({ window: 'ewma:0.5' });
    const last2 = DetectorConfigSchema.parse({ window: 'last:2' });
    let a = applyGroup(undefined, group(16), 1, ewma).state; // 1.0
    a = applyGroup(a, group(0), 2, ewma).state; // ewma 0.5
    expect(a.ewma).toBe(0.5);
    expect(a.band).toBe('boundary');
    expect(
      applyGroup(applyGroup(undefined, group(16), 1, PAPER_DETECTOR).state, group(0), 2, PAPER_DETECTOR).state
        .band,
    ).toBe('hard');
    let b = applyGroup(undefined, group(16), 1, last2).state;
    b = applyGroup(b, group(16), 2, last2).state;
    b = applyGroup(b, group(0), 3, last2).state; // window [1, 0]
    expect(b.recentMeans).toEqual([1, 0]);
    expect(b.signal).toBe(0.5);
  });

  it('keeps lastStep monotone when a tolerated older step arrives', () => {
    const s = applyGroup(
      applyGroup(undefined, group(4), 10, PAPER_DETECTOR).state,
      group(4),
      9,
      PAPER_DETECTOR,
    ).state;
    expect(s.lastStep).toBe(10);
  });
});

describe('checkGroup', () => {
  it('accepts a clean group and names the reason for each bad kind', () => {
    expect(checkGroup(group(3), 5, 4)).toBeNull();
    expect(checkGroup([], 1, undefined)?.code).toBe('empty-rewards');
    expect(checkGroup(new Array(1025).fill(0.5), 1, undefined)?.code).toBe('too-many-rollouts');
    expect(checkGroup(new Array(1024).fill(0.5), 1, undefined)).toBeNull();
    expect(checkGroup([0.5, Number.NaN], 1, undefined)).toEqual({
      code: 'non-finite-reward',
      reason: 'rewards[1] is NaN',
    });
    expect(checkGroup([Number.POSITIVE_INFINITY], 1, undefined)?.code).toBe('non-finite-reward');
    expect(checkGroup([1.0001], 1, undefined)?.code).toBe('reward-out-of-range');
    expect(checkGroup([-0.1], 1, undefined)?.code).toBe('reward-out-of-range');
    expect(checkGroup([0.5], 7, 10)?.code).toBe('stale-step');
    expect(checkGroup([0.5], 8, 10, DEFAULT_REWARD_LIMITS)).toBeNull();
    expect(checkGroup([0.5], -1, undefined)?.code).toBe('bad-step');
    // lateGroups: fold: a group published late is counted, however late.
    expect(checkGroup([0.5], 1, 10, { ...DEFAULT_REWARD_LIMITS, lateGroups: 'fold' })).toBeNull();
  });

  it('folds a late group into the all-rollout moments only, under lateGroups: fold', () => {
    const cfg = PAPER_DETECTOR;
    const at5 = applyGroup(undefined, [0.5, 0.5], 5, cfg).state;
    const at6 = applyGroup(at5, [1, 1], 6, cfg).state; // mastered now
    const late = applyGroup(at6, [0, 0], 4, cfg, 'fold');
    expect(late.bandChange).toBeNull();
    expect(late.state.groups).toBe(3);
    expect(late.state.moments.n).toBe(6);
    expect(late.state.moments.mean).toBeCloseTo(0.5, 12);
    // the latest group, the signal and the band stay those of step 6
    expect([late.state.latestMean, late.state.signal, late.state.band, late.state.lastStep]).toEqual([
      at6.latestMean,
      at6.signal,
      at6.band,
      6,
    ]);
    // under reject-stale (campaigns recorded before) a late group within the tolerance is the latest
    expect(applyGroup(at6, [0, 0], 4, cfg).state.latestMean).toBe(0);
  });
});

describe('step tally', () => {
  it('summarises per band and gives the boundary/other variance ratio', () => {
    let t = emptyTally();
    t = addToTally(t, 'boundary', 0.25);
    t = addToTally(t, 'boundary', 0.2);
    t = addToTally(t, 'hard', 0.1);
    t = addToTally(t, 'mastered', 0.0);
    expect(t.groups).toBe(4);
    expect(bandSummary(t.boundary)).toEqual({ tasks: 2, meanVariance: 0.225 });
    expect(bandSummary(emptyTally().hard)).toEqual({ tasks: 0, meanVariance: null });
    expect(boundaryVarianceRatio(t)).toBeCloseTo(0.225 / 0.05, 12);
  });
});

describe("a step record's columns", () => {
  const a = applyGroup(undefined, group(4), 3, PAPER_DETECTOR).state;
  const b = applyGroup(
    applyGroup(undefined, group(16), 2, PAPER_DETECTOR).state,
    group(9),
    3,
    PAPER_DETECTOR,
  ).state;
  const cols = stepStatsColumns([
    { taskId: 'a', state: a, bandBefore: null },
    { taskId: 'b', state: b, bandBefore: 'mastered' },
  ]);

  it('carry each task column by column, and give every field back per task', () => {
    expect(cols.taskId).toEqual(['a', 'b']);
    expect(cols.bandBefore).toEqual([null, 'mastered']);
    expect(cols.band).toEqual(['boundary', 'boundary']);
    const [ea, eb] = stepStatsEntries(cols);
    expect([ea!.taskId, ea!.bandBefore, eb!.taskId, eb!.bandBefore]).toEqual(['a', null, 'b', 'mastered']);
    // With what an entry leaves out derived, each is the state's own record.
    expect(statsOfStepEntry(ea!)).toEqual(statsRecord(a));
    expect(statsOfStepEntry(eb!)).toEqual(statsRecord(b));
  });

  it('refuse columns of unequal length instead of reading the shortest', () => {
    expect(() => stepStatsEntries({ ...cols, mean: [0.5] })).toThrow(StepStatsColumnsError);
    expect(() => stepStatsEntries({ ...cols, mean: [0.5] })).toThrow(/column mean has 1 entries for 2 tasks/);
  });
});
