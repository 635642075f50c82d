import { describe, expect, it } from 'vitest';
import { accuracyRow } from '../../../domain/evaluation.js';
import { accuracyPlot, type EvaluationSummary, fmtInterval, fmtPct, stepRange } from './accuracy.js';

let n = 0;
function evaluation(
  step: number | null,
  categories: [string, number, number][],
  over: Partial<EvaluationSummary> = {},
): EvaluationSummary {
  n += 1;
  const rows = categories.map(([category, correct, total]) => accuracyRow({ category, correct, total }));
  const sum = (k: 'correct' | 'total') => rows.reduce((s, r) => s + r[k], 0);
  return {
    evaluationId: `e${n}`,
    checkpointId: step === null ? null : `ck-${step}`,
    trainerStep: step,
    model: 'm',
    bfclEvalVersion: 'v',
    status: 'completed',
    reason: null,
    tasks: sum('total'),
    scored: sum('total'),
    startedAt: n,
    endedAt: n + 1,
    categories: rows,
    overall: accuracyRow({ category: 'overall', correct: sum('correct'), total: sum('total') }),
    ...over,
  };
}

describe('accuracyPlot', () => {
  it('draws one point per trainer step, in percent, with the overall interval and a line per category', () => {
    const late = evaluation(20, [
      ['base', 3, 4],
      ['miss_func', 1, 2],
    ]);
    const early = evaluation(5, [['base', 1, 2]]);
    const p = accuracyPlot([early, late]);
    expect(p.steps).toEqual([5, 20]);
    expect(p.drawn).toEqual([early, late]);
    expect(p.overall[0]).toBeCloseTo(50);
    expect(p.overall[1]).toBeCloseTo(400 / 6);
    expect(p.intervals[1]![0]).toBeCloseTo(late.overall.interval95[0] * 100);
    expect(p.intervals[1]![1]).toBeCloseTo(late.overall.interval95[1] * 100);
    expect(p.intervals[0]![0]).toBeLessThan(50);
    expect(p.intervals[0]![1]).toBeGreaterThan(50);
    expect(p.categories).toEqual(['base', 'miss_func']);
    // A category the earlier evaluation did not have is a gap there, not a zero.
    expect(p.byCategory).toEqual([
      [50, 75],
      [null, 50],
    ]);
    expect(p.notDrawn).toBe(0);
  });

  it('leaves out what has no step or no accuracy to draw, and counts it', () => {
    const base = evaluation(null, [['base', 1, 4]]);
    const failed = evaluation(10, [['base', 1, 1]], { status: 'failed', reason: 'endpoint down' });
    const nothing = evaluation(15, [], { status: 'running', tasks: 8, scored: 0 });
    const running = evaluation(25, [['base', 2, 3]], { status: 'running', tasks: 10 });
    const p = accuracyPlot([base, failed, nothing, running]);
    expect(p.steps).toEqual([25]);
    expect(p.drawn).toEqual([running]);
    expect(p.notDrawn).toBe(3);
  });

  it('draws one evaluation per step: completed over running, then the most tasks scored, then the later', () => {
    const running = evaluation(5, [['base', 9, 10]], { status: 'running' });
    const small = evaluation(5, [['base', 1, 2]]);
    const big = evaluation(5, [['base', 3, 8]]);
    const bigLater = evaluation(5, [['base', 4, 8]]);
    expect(accuracyPlot([running, small]).drawn).toEqual([small]);
    expect(accuracyPlot([small, big, running]).drawn).toEqual([big]);
    expect(accuracyPlot([bigLater, big]).drawn).toEqual([bigLater]);
    expect(accuracyPlot([small, big, running]).notDrawn).toBe(2);
  });

  it('is empty without evaluations', () => {
    expect(accuracyPlot([])).toEqual({
      steps: [],
      drawn: [],
      overall: [],
      intervals: [],
      categories: [],
      byCategory: [],
      notDrawn: 0,
    });
  });
});

describe('stepRange', () => {
  it('holds the steps of every series, a lone step widened by one either side, none without steps', () => {
    expect(stepRange([1, 2, 3], [5, 40])).toEqual([1, 40]);
    expect(stepRange([], [7])).toEqual([6, 8]);
    expect(stepRange([10, 20], [])).toEqual([10, 20]);
    expect(stepRange([], [])).toBeNull();
  });
});

describe('formats', () => {
  it('prints accuracy and its interval in percent', () => {
    expect(fmtPct(0.75)).toBe('75.0 %');
    expect(fmtPct(null)).toBe('-');
    expect(fmtInterval([0.30064, 0.95443])).toBe('[30.1, 95.4]');
  });
});
