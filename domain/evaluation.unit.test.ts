import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  accuracyByCategory,
  compareAccuracy,
  differenceInterval,
  evaluationIdOf,
  taskListSelection,
  wilson,
} from './evaluation.js';

const c = (correct: number, total: number) => ({ category: 'x', correct, total });

describe('wilson', () => {
  it('gives the published values (Newcombe 1998, Table I: 81/263 is 0.2553 to 0.3662; 0/10 is 0 to 0.2775)', () => {
    const [lo, hi] = wilson(81, 263);
    expect(lo).toBeCloseTo(0.2553, 4);
    expect(hi).toBeCloseTo(0.3662, 4);
    expect(wilson(0, 10)[0]).toBe(0);
    expect(wilson(0, 10)[1]).toBeCloseTo(0.2775, 4);
    expect(wilson(0, 0)).toEqual([0, 1]);
  });

  it('holds the observed proportion inside [0, 1] for any count', () => {
    fc.assert(
      fc.property(fc.integer({ min: 1, max: 5000 }), fc.double({ min: 0, max: 1, noNaN: true }), (n, f) => {
        const k = Math.floor(f * n);
        const [lo, hi] = wilson(k, n);
        expect(lo).toBeGreaterThanOrEqual(0);
        expect(hi).toBeLessThanOrEqual(1);
        expect(lo).toBeLessThanOrEqual(k / n + 1e-12);
        expect(hi).toBeGreaterThanOrEqual(k / n - 1e-12);
      }),
    );
  });
});

describe('differenceInterval', () => {
  it("gives Newcombe's method 10 on his example: 56/70 against 48/80 is 0.0524 to 0.3339", () => {
    const [lo, hi] = differenceInterval(c(48, 80), c(56, 70));
    expect(lo).toBeCloseTo(0.0524, 4);
    expect(hi).toBeCloseTo(0.3339, 4);
  });

  it('holds the observed difference and stays inside [-1, 1]', () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 1, max: 400 }),
        fc.integer({ min: 1, max: 400 }),
        fc.double({ min: 0, max: 1, noNaN: true }),
        fc.double({ min: 0, max: 1, noNaN: true }),
        (n1, n2, f1, f2) => {
          const a = c(Math.floor(f1 * n1), n1);
          const b = c(Math.floor(f2 * n2), n2);
          const d = b.correct / b.total - a.correct / a.total;
          const [lo, hi] = differenceInterval(a, b);
          expect(lo).toBeGreaterThanOrEqual(-1);
          expect(hi).toBeLessThanOrEqual(1);
          expect(lo).toBeLessThanOrEqual(d + 1e-12);
          expect(hi).toBeGreaterThanOrEqual(d - 1e-12);
        },
      ),
    );
  });
});

describe('accuracyByCategory', () => {
  const tasks = [
    { taskId: 'b1', category: 'base' },
    { taskId: 'f1', category: 'miss_func' },
    { taskId: 'b2', category: 'base' },
    { taskId: 'f2', category: 'miss_func' },
    { taskId: 'b3', category: 'base' },
  ];

  it('counts per category in the order of the tasks, only what was scored, each task once', () => {
    const r = accuracyByCategory(tasks, [
      { taskId: 'b1', category: 'base', valid: true },
      { taskId: 'f2', category: 'miss_func', valid: false },
      { taskId: 'b2', category: 'base', valid: false },
      { taskId: 'b1', category: 'base', valid: false },
      { taskId: 'zz', category: 'base', valid: true },
    ]);
    expect(r.categories).toEqual([
      { category: 'base', correct: 1, total: 2 },
      { category: 'miss_func', correct: 0, total: 1 },
    ]);
    expect([r.correct, r.total]).toEqual([1, 3]);
  });
});

describe('compareAccuracy', () => {
  it('compares per category and overall; significant only when the interval excludes 0', () => {
    const rows = compareAccuracy(
      [
        { category: 'base', correct: 48, total: 80 },
        { category: 'miss_func', correct: 5, total: 10 },
      ],
      [
        { category: 'base', correct: 56, total: 70 },
        { category: 'miss_func', correct: 6, total: 10 },
      ],
    );
    expect(rows.map((r) => r.category)).toEqual(['base', 'miss_func', 'overall']);
    expect(rows[0]!.significant).toBe(true);
    expect(rows[1]!.significant).toBe(false);
    expect(rows[2]!.a).toMatchObject({ correct: 53, total: 90 });
    expect(rows[2]!.b).toMatchObject({ correct: 62, total: 80 });
    expect(rows[0]!.difference).toBeCloseTo(0.2, 10);
  });
});

describe('evaluationIdOf', () => {
  it('is the same for the same request and differs by model, checkpoint and task selection', () => {
    const t = taskListSelection([{ taskId: 'multi_turn_base_150', category: 'base' }]);
    const id = evaluationIdOf('c1', 'run-1-step-4', 'ckpt', t);
    expect(id).toMatch(/^c1~run-1-step-4~[0-9a-f]{12}$/);
    expect(evaluationIdOf('c1', 'run-1-step-4', 'ckpt', t)).toBe(id);
    expect(evaluationIdOf('c1', 'run-1-step-4', 'other', t)).not.toBe(id);
    expect(evaluationIdOf('c1', null, 'ckpt', t)).toMatch(/^c1~base~/);
    const two = taskListSelection([
      { taskId: 'multi_turn_base_150', category: 'base' },
      { taskId: 'multi_turn_base_151', category: 'base' },
    ]);
    expect(evaluationIdOf('c1', 'run-1-step-4', 'ckpt', two)).not.toBe(id);
  });
});
