// The Augment stage's structural transformation (docs/architecture.md §3, step 5): a validated
// candidate becomes a miss_func or miss_param variant in BFCL's own format. The generator only
// chooses (which turn, which function or parameter) and writes the user texts; the record is
// built here, so no answer can produce a malformed task. Pure and sandbox-safe.
//
// BFCL's shape (bfcl-eval's multi_turn_miss_func / miss_param data):
// - miss_func: `missed_function` maps the turn where the function ARRIVES to its name; that turn
//   has no user message (the harness says the tools changed) and its ground truth is the deferred
//   calls; the turn before it (the holding turn) keeps its request and has an empty ground truth.
// - miss_param: the holding turn's request lacks a value and its ground truth is empty (the model
//   should ask); the next turn supplies the value and carries the holding turn's calls.
// Both move the holding turn's calls, unchanged and in order, one turn later: execution along the
// ground truth is the base's, shifted by one turn.

import { type Literal, parseCall } from './call-parser.js';
import type { CandidateTask } from './candidate.js';
import { variantCandidateId } from './ids.js';

export const VARIANT_KINDS = ['miss_func', 'miss_param'] as const;
export type VariantKind = (typeof VARIANT_KINDS)[number];

/** The generator's choice for a miss_func variant. */
export interface MissFuncChoice {
  kind: 'miss_func';
  /** The holding turn: a turn of the base that calls `function`. */
  turn: number;
  function: string;
}

/** The generator's choice for a miss_param variant. */
export interface MissParamChoice {
  kind: 'miss_param';
  turn: number;
  /** The call of the holding turn (index) and its argument (keyword name, or position) left out. */
  call: number;
  parameter: string;
  /** The holding turn's user message, without the value. */
  request: string;
  /** The next turn's user message, which supplies the value. */
  followUp: string;
}

export type VariantChoice = MissFuncChoice | MissParamChoice;

export class AugmentError extends Error {
  override name = 'AugmentError';
}

/** A variant's id: its base candidate's id and its kind (unique per base, one variant per kind). */
export function variantId(baseId: string, kind: VariantKind): string {
  return variantCandidateId(baseId, kind);
}

/** The source text of a literal value, as a user would name it (strings without quotes). */
export function literalText(l: Literal): string | null {
  switch (l.type) {
    case 'str':
      return l.value;
    case 'num':
      return l.text;
    case 'bool':
      return l.value ? 'True' : 'False';
    default:
      return null;
  }
}

function callNames(turn: readonly string[]): string[] {
  return turn.flatMap((c) => {
    const r = parseCall(c);
    return r.ok ? [r.call.name] : [];
  });
}

/** Moves the holding turn's calls to a new turn after it; the holding turn keeps no call. */
function shift(base: CandidateTask, turn: number, newTurn: CandidateTask['question'][number]) {
  const question = base.question.map((q) => q.map((m) => ({ ...m })));
  const ground_truth = base.ground_truth.map((g) => [...g]);
  const moved = ground_truth[turn]!;
  ground_truth[turn] = [];
  ground_truth.splice(turn + 1, 0, moved);
  question.splice(turn + 1, 0, newTurn);
  return { question, ground_truth };
}

function checkBase(base: CandidateTask, turn: number): void {
  if (base.missed_function && Object.keys(base.missed_function).length > 0)
    throw new AugmentError('the base already withholds a function');
  if (base.ground_truth.length !== base.question.length)
    throw new AugmentError('the base has as many question turns as ground-truth turns');
  if (!Number.isInteger(turn) || turn < 0 || turn >= base.ground_truth.length)
    throw new AugmentError(`turn ${turn} is not a turn of the base (0..${base.ground_truth.length - 1})`);
  if (base.ground_truth[turn]!.length === 0) throw new AugmentError(`turn ${turn} has no call to defer`);
}

/** Why a choice cannot make a variant of the base, or null when it can. */
export function choiceProblem(base: CandidateTask, choice: VariantChoice): string | null {
  try {
    buildVariant(base, choice);
    return null;
  } catch (e) {
    if (e instanceof AugmentError) return e.message;
    throw e;
  }
}

/** The variant of `base` that `choice` describes; throws AugmentError when the choice does not fit. */
export function buildVariant<T extends CandidateTask>(base: T, choice: VariantChoice): T {
  checkBase(base, choice.turn);
  const id = variantId(base.id, choice.kind);
  const { missed_function: _m, ...rest } = base;
  if (choice.kind === 'miss_func') {
    const fn = choice.function;
    if (!base.ground_truth.some((t) => callNames(t).includes(fn)))
      throw new AugmentError(`the base never calls ${fn}`);
    if (!callNames(base.ground_truth[choice.turn]!).includes(fn))
      throw new AugmentError(`turn ${choice.turn} does not call ${fn}`);
    const early = base.ground_truth.slice(0, choice.turn).findIndex((t) => callNames(t).includes(fn));
    if (early >= 0)
      throw new AugmentError(`${fn} is already called in turn ${early}, before it could arrive`);
    // The arrival turn has no user message: BFCL's harness tells the model the tools changed.
    const shifted = shift(base, choice.turn, []);
    return {
      ...rest,
      id,
      category: 'miss_func',
      ...shifted,
      missed_function: { [String(choice.turn + 1)]: [fn] },
    } as T;
  }
  const call = base.ground_truth[choice.turn]![choice.call];
  if (call === undefined) throw new AugmentError(`turn ${choice.turn} has no call ${choice.call}`);
  const parsed = parseCall(call);
  if (!parsed.ok) throw new AugmentError(`call ${choice.call} of turn ${choice.turn} does not parse`);
  const position = /^\d+$/.test(choice.parameter) ? Number(choice.parameter) : -1;
  const arg =
    position >= 0
      ? parsed.call.args[position]
      : parsed.call.kwargs.find((k) => k.name === choice.parameter)?.value;
  if (!arg)
    throw new AugmentError(`${parsed.call.name} in turn ${choice.turn} has no argument ${choice.parameter}`);
  const value = literalText(arg);
  if (value === null || value.trim() === '')
    throw new AugmentError(`argument ${choice.parameter} is not a plain value a user would state`);
  const request = choice.request.trim();
  const followUp = choice.followUp.trim();
  if (!request || !followUp) throw new AugmentError('the request and the follow-up must not be empty');
  if (request.includes(value))
    throw new AugmentError(`the request still states the value ${JSON.stringify(value)}`);
  if (!followUp.includes(value))
    throw new AugmentError(`the follow-up does not state the value ${JSON.stringify(value)}`);
  const shifted = shift(base, choice.turn, [{ role: 'user', content: followUp }]);
  shifted.question[choice.turn] = [{ role: 'user', content: request }];
  return { ...rest, id, category: 'miss_param', ...shifted } as T;
}

/**
 * The variant kinds a seed's children get. Per kind, the campaign's switch when set (true: every
 * seed, false: none), else the seed's own category: a miss_func seed's children get a miss_func
 * variant, a miss_param seed's a miss_param one, base and long_context seeds' none.
 */
export function variantKinds(
  seedCategory: string,
  augment: { missingFunction?: boolean | undefined; missingParameter?: boolean | undefined } | undefined,
): VariantKind[] {
  const on = (kind: VariantKind, flag: boolean | undefined) => flag ?? seedCategory === kind;
  return VARIANT_KINDS.filter((k) =>
    on(k, k === 'miss_func' ? augment?.missingFunction : augment?.missingParameter),
  );
}
