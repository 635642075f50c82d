import { describe, expect, it } from 'vitest';
import { AugmentError, buildVariant, choiceProblem, variantId, variantKinds } from './augment.js';
import { parseCampaignConfig } from './campaign-config.js';
import { type CandidateTask, checkCandidate, gateLimits } from './candidate.js';

const user = (content: string) => [{ role: 'user', content }];

/** bfcl-eval's multi_turn_base_0 (initial_config trimmed). */
function base0(): CandidateTask {
  return {
    id: 'multi_turn_base_0~s3',
    category: 'base',
    involved_classes: ['TwitterAPI', 'GorillaFileSystem'],
    initial_config: { GorillaFileSystem: { root: {} } },
    question: [
      user("Move 'final_report.pdf' within document directory to 'temp' directory in document."),
      user("Perform a detailed search using grep to identify sections pertaining to 'budget analysis'."),
      user("Upon identifying the requisite 'budget analysis' content, sort the 'final_report.pdf' by line."),
      user("Move 'previous_report.pdf' in document directory to temp as well and compare the two."),
    ],
    ground_truth: [
      [
        "cd(folder='document')",
        "mkdir(dir_name='temp')",
        "mv(source='final_report.pdf', destination='temp')",
      ],
      ["cd(folder='temp')", "grep(file_name='final_report.pdf',pattern='budget analysis')"],
      ["sort('final_report.pdf')"],
      [
        "cd(folder='..')",
        "mv(source='previous_report.pdf',destination='temp')",
        "cd(folder='temp')",
        "diff(file_name1='final_report.pdf',file_name2='previous_report.pdf')",
      ],
    ],
    excluded_function: ['cp'],
  };
}

const TOOLS = {
  GorillaFileSystem: ['cd', 'mkdir', 'mv', 'grep', 'sort', 'diff', 'ls', 'cp'],
  TwitterAPI: ['post_tweet'],
};
const LIMITS = gateLimits(parseCampaignConfig({}));
LIMITS.callsPerTurn.max = 4;
LIMITS.turns.max = 6;

describe('the Augment transformation', () => {
  it('makes a miss_func variant in BFCL shape: base_0 withholding sort is miss_func_0', () => {
    const base = base0();
    const v = buildVariant(base, { kind: 'miss_func', turn: 2, function: 'sort' });
    // bfcl-eval's multi_turn_miss_func_0: missed_function {"3": ["sort"]}, turn 2 holds, turn 3
    // has no user message and the deferred call
    expect(v.id).toBe('multi_turn_base_0~s3~miss_func');
    expect(v.category).toBe('miss_func');
    expect(v.missed_function).toEqual({ '3': ['sort'] });
    expect(v.ground_truth).toEqual([
      base.ground_truth[0],
      base.ground_truth[1],
      [],
      ["sort('final_report.pdf')"],
      base.ground_truth[3],
    ]);
    expect(v.question).toEqual([base.question[0], base.question[1], base.question[2], [], base.question[3]]);
    expect(v.excluded_function).toEqual(['cp']);
    expect(Object.keys(v).sort()).toEqual(Object.keys(base).concat('missed_function').sort());
    // the base is not touched
    expect(base.ground_truth[2]).toEqual(["sort('final_report.pdf')"]);
    expect(checkCandidate(v, TOOLS, LIMITS).ok).toBe(true);
  });

  it('refuses to withhold a function the task never calls, or one it needs earlier', () => {
    const base = base0();
    expect(choiceProblem(base, { kind: 'miss_func', turn: 2, function: 'post_tweet' })).toBe(
      'the base never calls post_tweet',
    );
    expect(choiceProblem(base, { kind: 'miss_func', turn: 2, function: 'diff' })).toBe(
      'turn 2 does not call diff',
    );
    // cd is called in turn 0: withholding it until turn 2 would make turn 0 impossible
    expect(choiceProblem(base, { kind: 'miss_func', turn: 1, function: 'cd' })).toBe(
      'cd is already called in turn 0, before it could arrive',
    );
    expect(choiceProblem(base, { kind: 'miss_func', turn: 9, function: 'sort' })).toMatch(/not a turn/);
    const withheld = { ...base, missed_function: { '1': ['grep'] } };
    expect(() => buildVariant(withheld, { kind: 'miss_func', turn: 2, function: 'sort' })).toThrow(
      AugmentError,
    );
    // withholding from the first turn is BFCL's shape too: the function arrives with turn 1
    const first = buildVariant(base, { kind: 'miss_func', turn: 0, function: 'mkdir' });
    expect(first.missed_function).toEqual({ '1': ['mkdir'] });
    expect(first.ground_truth[0]).toEqual([]);
    expect(checkCandidate(first, TOOLS, LIMITS).ok).toBe(true);
  });

  it('makes a miss_param variant: the request lacks the value, the next turn supplies it', () => {
    const base = base0();
    const choice = {
      kind: 'miss_param' as const,
      turn: 3,
      call: 1,
      parameter: 'source',
      request: 'Move one of the files in the document directory to temp as well and compare the two.',
      followUp: 'The file is previous_report.pdf.',
    };
    const v = buildVariant(base, choice);
    expect(v.id).toBe('multi_turn_base_0~s3~miss_param');
    expect(v.category).toBe('miss_param');
    expect(v.missed_function).toBeUndefined();
    expect(v.question).toEqual([
      base.question[0],
      base.question[1],
      base.question[2],
      user(choice.request),
      user(choice.followUp),
    ]);
    expect(v.ground_truth).toEqual([...base.ground_truth.slice(0, 3), [], base.ground_truth[3]]);
    expect(checkCandidate(v, TOOLS, LIMITS).ok).toBe(true);
    // positional arguments count by index
    const pos = buildVariant(base, {
      ...choice,
      turn: 2,
      call: 0,
      parameter: '0',
      request: 'Sort that file by line.',
      followUp: 'I mean final_report.pdf.',
    });
    expect(pos.ground_truth[2]).toEqual([]);
    expect(pos.ground_truth[3]).toEqual(["sort('final_report.pdf')"]);
  });

  it('refuses a miss_param choice whose texts do not withhold and supply the value', () => {
    const base = base0();
    const choice = {
      kind: 'miss_param' as const,
      turn: 3,
      call: 1,
      parameter: 'source',
      request: 'Move one of the files to temp.',
      followUp: 'The file is previous_report.pdf.',
    };
    expect(choiceProblem(base, choice)).toBeNull();
    expect(choiceProblem(base, { ...choice, request: 'Move previous_report.pdf to temp.' })).toMatch(
      /still states the value/,
    );
    expect(choiceProblem(base, { ...choice, followUp: 'That one.' })).toMatch(/does not state the value/);
    expect(choiceProblem(base, { ...choice, parameter: 'target' })).toMatch(/has no argument target/);
    expect(choiceProblem(base, { ...choice, call: 7 })).toMatch(/has no call 7/);
    expect(choiceProblem(base, { ...choice, request: '  ' })).toMatch(/must not be empty/);
  });

  it('derives variant ids and the kinds a seed category gets', () => {
    expect(variantId('multi_turn_miss_func_3~s7', 'miss_func')).toBe('multi_turn_miss_func_3~s7~miss_func');
    const cfg = parseCampaignConfig({}).synthesis.augment;
    expect(variantKinds('miss_func', cfg)).toEqual(['miss_func']);
    expect(variantKinds('miss_param', cfg)).toEqual(['miss_param']);
    expect(variantKinds('base', cfg)).toEqual([]);
    expect(variantKinds('long_context', cfg)).toEqual([]);
    expect(variantKinds('base', { missingFunction: true })).toEqual(['miss_func']);
    expect(variantKinds('miss_func', { missingFunction: false })).toEqual([]);
    expect(variantKinds('base', { missingFunction: true, missingParameter: true })).toEqual([
      'miss_func',
      'miss_param',
    ]);
  });
});
