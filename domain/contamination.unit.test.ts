import { describe, expect, it } from 'vitest';
import {
  type ContaminationRule,
  contaminationReason,
  fingerprint,
  isContaminated,
  nearestEvalTask,
  overlap,
} from './contamination.js';

const RULE: ContaminationRule = { ngram: 5, textOverlap: 0.5, sameCallsAndState: true };

const task = (turns: string[], calls: string[][], state: Record<string, Record<string, unknown>> = {}) => ({
  question: turns.map((content) => [{ role: 'user', content }]),
  ground_truth: calls,
  initial_config: state,
});

const STATE = { GorillaFileSystem: { root: { docs: { type: 'directory', contents: {} } } } };
const EVAL = task(
  [
    'Move into the docs directory and make a fresh file named ideas.txt for the team',
    'Put the line ship it on friday into ideas.txt and read the file back to me',
  ],
  [
    ["cd(folder='docs')", "touch(file_name='ideas.txt')"],
    ["echo(content='ship it on friday', file_name='ideas.txt')", "cat(file_name='ideas.txt')"],
  ],
  STATE,
);
const evalSet = [
  { id: 'eval-other', fingerprint: fingerprint(task(['List the files here please'], [['ls()']]), 5) },
  { id: 'eval-copied', fingerprint: fingerprint(EVAL, 5) },
];

describe('contamination by the evaluation set', () => {
  it('a planted copy: every n-gram shared, the same calls and state', () => {
    const m = nearestEvalTask(fingerprint(EVAL, 5), evalSet, RULE);
    expect(m).toEqual({
      evalTaskId: 'eval-copied',
      textOverlap: 1,
      sameCalls: true,
      sameState: true,
      contaminated: true,
    });
    expect(contaminationReason(m!, RULE)).toBe(
      'copies evaluation task eval-copied (user-turn 5-gram overlap 1.000, same ground-truth calls: yes, ' +
        'same initial state: yes): 5-gram overlap >= 0.5; same calls from the same state',
    );
  });

  it('a paraphrase: no n-gram shared, but the same calls (spacing, quotes and keyword order aside) from the same state', () => {
    const paraphrase = task(
      [
        'Go to docs and create ideas.txt, a new empty file',
        'Write ship it on friday in it, then show me what it holds',
      ],
      [
        ['cd( folder = "docs" )', 'touch(file_name="ideas.txt")'],
        ["echo(file_name='ideas.txt', content='ship it on friday')", "cat(file_name='ideas.txt')"],
      ],
      structuredClone(STATE),
    );
    const m = nearestEvalTask(fingerprint(paraphrase, 5), evalSet, RULE)!;
    expect(m).toMatchObject({
      evalTaskId: 'eval-copied',
      sameCalls: true,
      sameState: true,
      contaminated: true,
    });
    expect(m.textOverlap).toBeLessThan(0.2);
    expect(contaminationReason(m, RULE)).toMatch(/: same calls from the same state$/);
    // Without the calls-and-state signal, only the text counts.
    expect(isContaminated(m, { ...RULE, sameCallsAndState: false })).toBe(false);
  });

  it('the same calls from another state, or other calls from the same state, are not contamination', () => {
    const otherState = fingerprint({ ...EVAL, question: [], initial_config: {} }, 5);
    expect(overlap(otherState, evalSet[1]!.fingerprint)).toEqual({
      textOverlap: 0,
      sameCalls: true,
      sameState: false,
    });
    const otherCalls = fingerprint({ ...EVAL, question: [], ground_truth: [["cd(folder='docs')"]] }, 5);
    expect(overlap(otherCalls, evalSet[1]!.fingerprint)).toEqual({
      textOverlap: 0,
      sameCalls: false,
      sameState: true,
    });
    for (const fp of [otherState, otherCalls])
      expect(nearestEvalTask(fp, evalSet, RULE)!.contaminated).toBe(false);
  });

  it('text overlap is the shared share of the smaller n-gram set: one turn of an evaluation task copied is contamination', () => {
    const oneTurn = task([EVAL.question[0]![0]!.content], [['pwd()']]);
    const m = nearestEvalTask(fingerprint(oneTurn, 5), evalSet, RULE)!;
    expect(m).toMatchObject({
      evalTaskId: 'eval-copied',
      textOverlap: 1,
      sameCalls: false,
      contaminated: true,
    });
    // The first 8 words of that turn and 7 others: 11 five-grams, the 4 within the 8 words shared.
    const words = EVAL.question[0]![0]!.content.split(' ');
    const half = task(
      [[...words.slice(0, 8), 'and', 'then', 'stop', 'there', 'right', 'now', 'ok'].join(' ')],
      [['pwd()']],
    );
    const h = nearestEvalTask(fingerprint(half, 5), evalSet, RULE)!;
    expect(h.textOverlap).toBeCloseTo(4 / 11, 12);
    expect(h.contaminated).toBe(false);
  });

  it('a clean task is reported with its nearest evaluation task and not rejected; an empty set has none', () => {
    const clean = task(
      ['Find every line about budget in report.md and count them'],
      [["grep(file_name='report.md', pattern='budget')"]],
    );
    const m = nearestEvalTask(fingerprint(clean, 5), evalSet, RULE)!;
    expect(m.contaminated).toBe(false);
    expect(m.textOverlap).toBe(0);
    expect(nearestEvalTask(fingerprint(clean, 5), [], RULE)).toBeUndefined();
  });
});
