// The known-answer policy: a chat-completions "model" with tool calling whose BFCL accuracy is
// known in advance. For the task ids it is told are right it answers each turn with BFCL's ground
// truth as tool calls; for every other task it answers plain text without calls (a wrong answer
// per bfcl-eval's checker: an empty model response in a turn that has ground-truth calls). It
// recognises the task and turn from what bfcl-eval's multi-turn FC loop sends
// (model_handler/base_handler.py inference_multi_turn_FC): the user messages so far are the task's
// question turns in order (a miss_func turn that brings withheld functions has bfcl's own user
// prompt), their count is the turn index, and a request that ends with tool results is answered
// with text, which ends the turn. Ground-truth call strings are parsed (pycall.ts), never run.
import { classOf, paramNames } from '../../domain/bfcl-catalog.js';
import { SEED_CATEGORIES, type SeedCategory, type TaskRecord } from '../../domain/task.js';
import { type PyValue, parseCall } from './pycall.js';
import { Rng } from './rng.js';

/**
 * The user message bfcl-eval's FC loop sends at a turn that adds the withheld functions
 * (bfcl_eval/constants/default_prompts.py DEFAULT_USER_PROMPT_FOR_ADDITIONAL_FUNCTION_FC,
 * used at base_handler.py:188).
 */
export const BFCL_ADDED_FUNCTIONS_PROMPT =
  'I have updated some more functions you can choose from. What about now?';

/** The text a wrong task gets: no tool calls, so every turn with ground-truth calls fails. */
export const POLICY_WRONG_ANSWER = 'I am not able to help with that.';
/** The text that ends a turn after the calls' tool results. */
export const POLICY_TURN_DONE = 'Done.';

export interface PolicyOptions {
  /** The tasks the policy can recognise (the executor's GET /seeds records). */
  tasks: TaskRecord[];
  /** Task ids answered with their ground truth. */
  correct?: Iterable<string>;
  /** Or: this share of the tasks, drawn per task id with `seed` (added to `correct`). */
  correctFraction?: number;
  seed?: number;
}

export interface OpenAiToolCall {
  id: string;
  type: 'function';
  function: { name: string; arguments: string };
}

export interface PolicyMessage {
  role: string;
  content?: unknown;
}

export type PolicyAnswer =
  | { kind: 'calls'; taskId: string; turn: number; toolCalls: OpenAiToolCall[] }
  | { kind: 'text'; taskId: string; turn: number; content: string; why: 'turn-done' | 'no-calls' | 'wrong' };

export class PolicyError extends Error {
  override name = 'PolicyError';
}

const contentText = (c: unknown): string =>
  typeof c === 'string'
    ? c
    : Array.isArray(c)
      ? c.map((p) => (p && typeof p === 'object' && 'text' in p ? String(p.text ?? '') : '')).join('')
      : '';

/** The user message texts bfcl-eval sends for a task, one per question turn. */
export function userTurns(task: TaskRecord): string[] {
  return task.question.map((turn) => {
    const user = turn.find((m) => m.role === 'user');
    return user ? user.content : BFCL_ADDED_FUNCTIONS_PROMPT;
  });
}

/** Whether the policy answers this id right: listed, or drawn with the seed for the fraction. */
export function drawnCorrect(id: string, fraction: number, seed: number): boolean {
  return fraction > 0 && new Rng(`${seed}|policy|${id}`).next() < fraction;
}

/** A number literal's Python text as JSON number text (a float stays a float: `1.0`). */
function jsonNumber(text: string): string {
  let t = text.replace(/_/g, '');
  const sign = t.startsWith('-') ? '-' : '';
  t = t.replace(/^[+-]/, '');
  if (/^0[xob]/i.test(t)) return sign + String(Number(t));
  if (t.startsWith('.')) t = `0${t}`;
  t = t.replace(/\.(?=[eE]|$)/, '.0');
  t = t.replace(/^0+(?=\d)/, '');
  return sign + t;
}

/** A literal as JSON text, keeping int/float as written (JSON.stringify would print 1.0 as 1). */
export function pyJson(v: PyValue): string {
  switch (v.t) {
    case 'str':
      return JSON.stringify(v.v);
    case 'num':
      return jsonNumber(v.text);
    case 'bool':
      return v.v ? 'true' : 'false';
    case 'none':
      return 'null';
    case 'list':
      return `[${v.items.map(pyJson).join(', ')}]`;
    case 'dict':
      return `{${v.entries
        .map(
          ([k, x]) =>
            `${JSON.stringify(k.t === 'str' ? k.v : k.t === 'num' ? jsonNumber(k.text) : pyJson(k))}: ${pyJson(x)}`,
        )
        .join(', ')}}`;
  }
}

/**
 * A ground-truth call string as an OpenAI tool call: the name as bfcl-eval's FC handler offers it
 * (model_handler/utils.py convert_to_tool replaces `.` with `_`; BFCL multi-turn names have none),
 * positional arguments named from the method's parameters (domain/bfcl-catalog), keyword
 * arguments as given, values as JSON. bfcl decodes it back with `name(k=repr(v), ...)`.
 */
export function toToolCall(call: string, classes: readonly string[], id: string): OpenAiToolCall {
  const c = parseCall(call);
  const parts: string[] = [];
  if (c.args.length > 0) {
    const names = paramNames(classOf(c.name, classes), c.name);
    if (names.length < c.args.length)
      throw new PolicyError(
        `${call}: ${c.args.length} positional arguments, but ${c.name} of ${classes.join(', ')} names ${names.length}`,
      );
    c.args.forEach((v, i) => {
      parts.push(`${JSON.stringify(names[i])}: ${pyJson(v)}`);
    });
  }
  for (const [k, v] of c.kwargs) parts.push(`${JSON.stringify(k)}: ${pyJson(v)}`);
  return {
    id,
    type: 'function',
    function: { name: c.name.replace(/\./g, '_'), arguments: `{${parts.join(', ')}}` },
  };
}

export interface Recognised {
  task: TaskRecord;
  /** The question turn this request belongs to (user messages so far minus one). */
  turn: number;
  /** The request ends with tool results (the policy's calls were run): the turn is answered. */
  afterTools: boolean;
}

export class Policy {
  private readonly tasks: TaskRecord[];
  private readonly correct: Set<string>;
  private readonly byFirst = new Map<string, TaskRecord[]>();

  constructor(opts: PolicyOptions) {
    this.tasks = opts.tasks;
    const ids = new Set(this.tasks.map((t) => t.id));
    this.correct = new Set();
    for (const id of opts.correct ?? []) {
      if (!ids.has(id))
        throw new PolicyError(`--policy-correct names ${id}, which is not among the policy's tasks`);
      this.correct.add(id);
    }
    const fraction = opts.correctFraction ?? 0;
    if (!(fraction >= 0 && fraction <= 1))
      throw new PolicyError(`correctFraction must be between 0 and 1, got ${fraction}`);
    for (const t of this.tasks) if (drawnCorrect(t.id, fraction, opts.seed ?? 0)) this.correct.add(t.id);
    for (const t of this.tasks) {
      const first = userTurns(t)[0] ?? '';
      this.byFirst.set(first, [...(this.byFirst.get(first) ?? []), t]);
    }
  }

  /** The ids answered right, sorted. */
  correctIds(): string[] {
    return [...this.correct].sort();
  }

  isCorrect(id: string): boolean {
    return this.correct.has(id);
  }

  /**
   * The task and turn a request is for. `category` narrows the candidates (the same question text
   * opens a task in several categories, and base and long_context differ only in their initial
   * state, which a request does not show); without it, candidates that would be answered
   * differently at this turn make the request ambiguous.
   */
  recognise(messages: readonly PolicyMessage[], category?: SeedCategory): Recognised {
    const users = messages.filter((m) => m.role === 'user').map((m) => contentText(m.content));
    if (users.length === 0) throw new PolicyError('no user message: not a BFCL multi-turn request');
    const turn = users.length - 1;
    const candidates = (this.byFirst.get(users[0] as string) ?? []).filter((t) => {
      if (category && t.category !== category) return false;
      const expected = userTurns(t);
      return users.length <= expected.length && users.every((u, i) => u === expected[i]);
    });
    if (candidates.length === 0)
      throw new PolicyError(
        `no task${category ? ` of category ${category}` : ''} among the policy's ${this.tasks.length} opens with these ${users.length} user turn(s)`,
      );
    const afterTools = messages[messages.length - 1]?.role === 'tool';
    const [first] = candidates as [TaskRecord, ...TaskRecord[]];
    if (candidates.length > 1) {
      const answer = (t: TaskRecord) => JSON.stringify([this.isCorrect(t.id), t.ground_truth[turn]]);
      if (!afterTools && candidates.some((t) => answer(t) !== answer(first)))
        throw new PolicyError(
          `ambiguous: ${candidates.map((t) => t.id).join(', ')} open with these user turns and are answered differently at turn ${turn}; ask /policy/<category>/v1`,
        );
    }
    return { task: first, turn, afterTools };
  }

  /** What the policy answers to a request of bfcl-eval's FC loop. */
  answer(messages: readonly PolicyMessage[], category?: SeedCategory): PolicyAnswer {
    const { task, turn, afterTools } = this.recognise(messages, category);
    const base = { taskId: task.id, turn };
    if (afterTools) return { ...base, kind: 'text', content: POLICY_TURN_DONE, why: 'turn-done' };
    if (!this.isCorrect(task.id))
      return { ...base, kind: 'text', content: POLICY_WRONG_ANSWER, why: 'wrong' };
    const calls = task.ground_truth[turn] ?? [];
    if (calls.length === 0) return { ...base, kind: 'text', content: POLICY_TURN_DONE, why: 'no-calls' };
    return {
      ...base,
      kind: 'calls',
      toolCalls: calls.map((c, i) => toToolCall(c, task.involved_classes, `call_${turn}_${i}`)),
    };
  }
}

/** The tasks of every category from the executor's GET /seeds (what the policy can recognise). */
export async function fetchPolicyTasks(
  seeds: (category: SeedCategory, limit: number, offset: number) => Promise<TaskRecord[]>,
): Promise<TaskRecord[]> {
  const all: TaskRecord[] = [];
  for (const category of SEED_CATEGORIES) {
    for (let offset = 0; ; offset += 500) {
      const page = await seeds(category, 500, offset);
      all.push(...page);
      if (page.length < 500) break;
    }
  }
  return all;
}

export function isSeedCategory(s: string): s is SeedCategory {
  return (SEED_CATEGORIES as readonly string[]).includes(s);
}
