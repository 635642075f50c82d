import { describe, expect, it } from 'vitest';
import { buildVariant } from './augment.js';
import type { CandidateTask } from './candidate.js';
import { callsPerTurnCap, structuralCategory, structureMismatch, structureOf } from './structure.js';

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

describe('the category a generated task is labelled by', () => {
  // A child as plan -> execute -> rewrite make it from bfcl-eval's multi_turn_base_0: four turns, each with calls.
  const child = (category: string): CandidateTask => ({
    id: `multi_turn_${category}_0~s3`,
    category,
    involved_classes: ['GorillaFileSystem'],
    initial_config: { GorillaFileSystem: { root: {} } },
    question: [0, 1, 2, 3].map((i) => [{ role: 'user', content: `request ${i}` }]),
    ground_truth: [
      ["cd(folder='document')", "mkdir(dir_name='temp')"],
      ["cd(folder='temp')"],
      ["sort('final_report.pdf')"],
      ["diff(file_name1='final_report.pdf',file_name2='previous_report.pdf')"],
    ],
  });

  it("is base for a child of a miss_func or miss_param seed that lacks the seed's withheld function or value", () => {
    expect(structuralCategory(child('miss_func'))).toBe('base');
    expect(structuralCategory(child('miss_param'))).toBe('base');
    expect(structuralCategory(child('base'))).toBe('base');
    // Long context is the environment's mode for the category: the label stays.
    expect(structuralCategory(child('long_context'))).toBe('long_context');
  });

  it("is the variant's kind for the Augment stage's variants, in BFCL's shapes", () => {
    const func = buildVariant(child('base'), { kind: 'miss_func', turn: 2, function: 'sort' });
    expect(structuralCategory({ ...func, category: 'base' })).toBe('miss_func');
    const param = buildVariant(child('base'), {
      kind: 'miss_param',
      turn: 2,
      call: 0,
      parameter: '0',
      request: 'Sort the report.',
      followUp: "It is 'final_report.pdf'.",
    });
    expect(structuralCategory({ ...param, category: 'long_context' })).toBe('miss_param');
  });

  it('is miss_func only when each arrival turn follows a holding turn without calls', () => {
    const shaped = { ...child('base'), ground_truth: [["cd(folder='a')"], [], ["sort('x')"], ['ls()']] };
    expect(structuralCategory({ ...shaped, missed_function: { '2': ['sort'] } })).toBe('miss_func');
    // An arrival turn whose previous turn has calls is no withheld function.
    expect(structuralCategory({ ...child('miss_func'), missed_function: { '2': ['sort'] } })).toBe('base');
    expect(structuralCategory({ ...shaped, missed_function: { '9': ['sort'] } })).toBe('base');
  });
});
