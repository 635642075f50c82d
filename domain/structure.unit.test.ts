import { describe, expect, it } from 'vitest';
import { callsPerTurnCap, structureMismatch, structureOf } from './structure.js';

const task = (calls: number[], classes = ['GorillaFileSystem']) => ({
  involved_classes: classes,
  ground_truth: calls.map((n) => Array.from({ length: n }, () => 'ls()')),
});
const tol = { turns: 2, meanCallsPerTurn: 1.5 };

describe('structure against the seed', () => {
  it('measures turns with calls, mean and largest calls per turn (empty turns of miss_* tasks left out)', () => {
    expect(structureOf(task([2, 0, 4, 3]))).toEqual({ turns: 3, meanCallsPerTurn: 3, maxCallsPerTurn: 4 });
    expect(structureOf(task([]))).toEqual({ turns: 0, meanCallsPerTurn: 0, maxCallsPerTurn: 0 });
  });

  it("raises the per-turn call cap to the seed's largest turn, never lowers it", () => {
    expect(callsPerTurnCap(3, task([1, 5, 2]))).toBe(5);
    expect(callsPerTurnCap(3, task([1, 2]))).toBe(3);
  });

  it('accepts a child within the tolerance', () => {
    expect(structureMismatch(task([1, 2]), task([2, 2, 1, 1]), tol)).toBeUndefined();
  });

  it('names every difference beyond the tolerance', () => {
    expect(structureMismatch(task([1, 1]), task([1, 1, 1, 1, 1]), tol)).toBe(
      "2 turns with calls against the seed's 5 (tolerance 2)",
    );
    expect(structureMismatch(task([1, 1, 1]), task([4, 4, 3]), tol)).toBe(
      "1.00 calls per turn against the seed's 3.67 (tolerance 1.5)",
    );
    expect(structureMismatch(task([1, 1], ['GorillaFileSystem', 'TwitterAPI']), task([1, 1]), tol)).toBe(
      "classes TwitterAPI are not among the seed's",
    );
  });
});
