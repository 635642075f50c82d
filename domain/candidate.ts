// A synthesized candidate task (a BFCL multi-turn record): its canonical identity and the
// deterministic gates of the Critique stage (docs/architecture.md §3, step 4), which run before the LLM judge.
// Pure and sandbox-safe: no I/O, no node:crypto (SHA-256 from @noble/hashes), no eval — call
// strings are parsed by the restricted parser in call-parser.ts.
//
// Decisions documented here:
// - Identity. canonicalContent is the canonical JSON (sorted keys, see canonical-json.ts) of the
//   record without its `id`, so two candidates with the same content and different ids have the
//   same candidateHash (the dedupe key); every other field counts, including unknown ones.
// - Turns are the user turns of `question` (empty turns included, e.g. the turn of a miss_func
//   task where the withheld function is added); `ground_truth` must have as many turns.
// - Calls per turn: every turn has at most callsPerTurn.max calls and at least callsPerTurn.min,
//   except turns deliberately left without calls: the turns listed in missed_function and the
//   turns just before them (the holding turns of BFCL's miss_func tasks), and any
//   turn of a miss_param task (where the model should ask for the missing parameter). A task
//   needs at least one call in all.
// - Tools available at turn t: the methods of the involved classes (from the catalog passed in),
//   minus excluded_function, minus missed functions whose turn is after t.
// - Strings (values and object keys) are measured in Unicode code points, as Python's len; lists
//   (and tuples in call arguments) by their items; dicts are not lists. Both limits apply
//   anywhere in initial_config and in every call argument (after escapes and implicit string
//   concatenation). initial_config deeper than MAX_CONFIG_DEPTH is refused ('too-deep').

import { codePointLength, type Literal, type ParsedCall, parseCall, snippet } from './call-parser.js';
import type { CampaignConfig } from './campaign-config.js';
import { canonicalJson, sha256Hex } from './canonical-json.js';
import type { TaskFields } from './task.js';

export const MAX_CONFIG_DEPTH = 64;

/** A user message of a task's turn. */
export type CandidateMessage = TaskFields['question'][number][number];

/**
 * A BFCL multi-turn task record as the gate reads it: the one task shape (domain/task.ts), with
 * what the gate checks itself left open (any category string, any state per class), so that it
 * names what is wrong instead of the schema refusing the record unread.
 */
export type CandidateTask = Omit<TaskFields, 'category' | 'initial_config'> & {
  category: string;
  initial_config: Record<string, unknown>;
  [key: string]: unknown;
};

function withoutId(c: object): Record<string, unknown> {
  return Object.fromEntries(Object.entries(c).filter(([k]) => k !== 'id'));
}

/** Canonical JSON of the candidate without its id (sorted keys, no whitespace). */
export function canonicalContent(candidate: object): string {
  return canonicalJson(withoutId(candidate));
}

/** SHA-256 (hex) of canonicalContent: the content identity of a candidate (dedupe key). */
export function candidateHash(candidate: object): string {
  return sha256Hex(canonicalContent(candidate));
}

// ---------------------------------------------------------------------------------------------
// Gates

export type GateCode =
  | 'malformed'
  | 'turn-mismatch'
  | 'too-few-turns'
  | 'too-many-turns'
  | 'unknown-class'
  | 'unparseable-call'
  | 'unknown-tool'
  | 'too-few-calls'
  | 'too-many-calls'
  | 'string-too-long'
  | 'list-too-long'
  | 'too-deep';

export type GateResult = { ok: true; calls: ParsedCall[][] } | { ok: false; code: GateCode; reason: string };

export interface GateLimits {
  maxStringLength: number;
  maxListItems: number;
  turns: { min: number; max: number };
  callsPerTurn: { min: number; max: number };
}

export function gateLimits(cfg: Pick<CampaignConfig, 'synthesis'>): GateLimits {
  const s = cfg.synthesis;
  return {
    maxStringLength: s.maxStringLength,
    maxListItems: s.maxListItems,
    turns: { ...s.turns },
    callsPerTurn: { ...s.callsPerTurn },
  };
}

/** Method names per API class: a Map or a plain object (own properties only). */
export type ToolCatalog =
  | ReadonlyMap<string, readonly string[]>
  | Readonly<Record<string, readonly string[]>>;

function toolsOf(catalog: ToolCatalog, cls: string): readonly string[] | undefined {
  if (typeof (catalog as ReadonlyMap<string, readonly string[]>).get === 'function') {
    return (catalog as ReadonlyMap<string, readonly string[]>).get(cls);
  }
  const r = catalog as Readonly<Record<string, readonly string[]>>;
  return Object.hasOwn(r, cls) ? r[cls] : undefined;
}

class GateFailure extends Error {
  constructor(
    readonly code: GateCode,
    reason: string,
  ) {
    super(reason);
  }
}

function fail(code: GateCode, reason: string): never {
  throw new GateFailure(code, reason);
}

const isObject = (v: unknown): v is Record<string, unknown> =>
  typeof v === 'object' && v !== null && !Array.isArray(v);
const isStringArray = (v: unknown): v is string[] =>
  Array.isArray(v) && v.every((x) => typeof x === 'string');

function segment(key: string): string {
  return /^[A-Za-z_][A-Za-z0-9_]*$/.test(key) && key.length <= 40 ? `.${key}` : `[${snippet(key, 20)}]`;
}

/** Structural check of a BFCL multi-turn record; returns it typed, or fails with 'malformed'. */
function shape(c: unknown): CandidateTask {
  if (!isObject(c)) fail('malformed', 'the candidate must be a JSON object (a BFCL multi-turn record)');
  if (typeof c.id !== 'string' || c.id.length === 0) fail('malformed', 'id must be a non-empty string');
  if (typeof c.category !== 'string' || c.category.length === 0) {
    fail('malformed', 'category must be a non-empty string');
  }
  if (!isStringArray(c.involved_classes) || c.involved_classes.length === 0) {
    fail('malformed', 'involved_classes must be a non-empty list of class names');
  }
  if (!isObject(c.initial_config))
    fail('malformed', 'initial_config must be an object (state per API class)');
  if (!Array.isArray(c.question)) fail('malformed', 'question must be a list of user turns');
  c.question.forEach((turn, t) => {
    if (!Array.isArray(turn)) fail('malformed', `question[${t}] must be a list of messages`);
    turn.forEach((m, i) => {
      if (!isObject(m) || typeof m.role !== 'string' || typeof m.content !== 'string') {
        fail('malformed', `question[${t}][${i}] must be a message {role, content} with string values`);
      }
    });
  });
  if (!Array.isArray(c.ground_truth))
    fail('malformed', 'ground_truth must be a list of turns of call strings');
  c.ground_truth.forEach((turn, t) => {
    if (!isStringArray(turn)) fail('malformed', `ground_truth[${t}] must be a list of call strings`);
  });
  if (c.missed_function !== undefined) {
    if (!isObject(c.missed_function))
      fail('malformed', 'missed_function must map turn indices to function names');
    for (const [k, v] of Object.entries(c.missed_function)) {
      if (!/^(0|[1-9][0-9]{0,5})$/.test(k))
        fail('malformed', `missed_function key ${snippet(k, 20)} is not a turn index`);
      if (!isStringArray(v)) fail('malformed', `missed_function[${k}] must be a list of function names`);
    }
  }
  if (c.excluded_function !== undefined && !isStringArray(c.excluded_function)) {
    fail('malformed', 'excluded_function must be a list of function names');
  }
  return c as CandidateTask;
}

/** Walks a JSON value without recursion: string and list limits, depth limit. */
function checkJson(root: unknown, rootPath: string, limits: GateLimits): void {
  const stack: { v: unknown; path: string; depth: number }[] = [{ v: root, path: rootPath, depth: 0 }];
  while (stack.length > 0) {
    const { v, path, depth } = stack.pop()!;
    if (depth > MAX_CONFIG_DEPTH) fail('too-deep', `${path}: nested deeper than ${MAX_CONFIG_DEPTH} levels`);
    if (typeof v === 'string') {
      const n = codePointLength(v);
      if (n > limits.maxStringLength) {
        fail(
          'string-too-long',
          `${path}: string of ${n} characters exceeds ${limits.maxStringLength} (${snippet(v)})`,
        );
      }
    } else if (Array.isArray(v)) {
      if (v.length > limits.maxListItems) {
        fail('list-too-long', `${path}: list of ${v.length} items exceeds ${limits.maxListItems}`);
      }
      for (let i = v.length - 1; i >= 0; i--)
        stack.push({ v: v[i], path: `${path}[${i}]`, depth: depth + 1 });
    } else if (isObject(v)) {
      const keys = Object.keys(v).sort().reverse();
      for (const k of keys) {
        const n = codePointLength(k);
        if (n > limits.maxStringLength) {
          fail(
            'string-too-long',
            `${path}: key of ${n} characters exceeds ${limits.maxStringLength} (${snippet(k)})`,
          );
        }
        stack.push({ v: v[k], path: `${path}${segment(k)}`, depth: depth + 1 });
      }
    }
  }
}

/** String and list limits inside a parsed literal (depth is bounded by the parser). */
function checkLiteral(l: Literal, where: string, limits: GateLimits): void {
  switch (l.type) {
    case 'str': {
      const n = codePointLength(l.value);
      if (n > limits.maxStringLength) {
        fail(
          'string-too-long',
          `${where}: string of ${n} characters exceeds ${limits.maxStringLength} (${snippet(l.value)})`,
        );
      }
      return;
    }
    case 'list':
    case 'tuple':
      if (l.items.length > limits.maxListItems) {
        fail(
          'list-too-long',
          `${where}: ${l.type} of ${l.items.length} items exceeds ${limits.maxListItems}`,
        );
      }
      for (const [i, item] of l.items.entries()) checkLiteral(item, `${where}[${i}]`, limits);
      return;
    case 'dict':
      l.entries.forEach(([k, v], i) => {
        checkLiteral(k, `${where} key ${i}`, limits);
        checkLiteral(v, `${where}[${i}]`, limits);
      });
      return;
    default:
      return;
  }
}

/**
 * The deterministic gates of a candidate: structure, turns, classes, tools, calls per turn,
 * string and list limits. `tools` maps each API class to its public method names (the
 * environment executor's catalog). Returns the first failure, or the parsed calls per turn.
 */
export function checkCandidate(candidate: unknown, tools: ToolCatalog, limits: GateLimits): GateResult {
  try {
    return { ok: true, calls: gate(candidate, tools, limits) };
  } catch (e) {
    if (e instanceof GateFailure) return { ok: false, code: e.code, reason: e.message };
    throw e;
  }
}

function gate(candidate: unknown, catalog: ToolCatalog, limits: GateLimits): ParsedCall[][] {
  const c = shape(candidate);
  const turns = c.question.length;
  if (c.ground_truth.length !== turns) {
    fail('turn-mismatch', `question has ${turns} turns but ground_truth has ${c.ground_truth.length}`);
  }
  if (turns < limits.turns.min)
    fail('too-few-turns', `${turns} turns; at least ${limits.turns.min} are required`);
  if (turns > limits.turns.max)
    fail('too-many-turns', `${turns} turns; at most ${limits.turns.max} are allowed`);

  const all = new Set<string>();
  for (const cls of c.involved_classes) {
    const methods = toolsOf(catalog, cls);
    if (!methods) fail('unknown-class', `involved class ${snippet(cls, 60)} is not a known API class`);
    for (const m of methods) all.add(m);
  }
  const excluded = new Set(c.excluded_function ?? []);
  const missedFrom = new Map<string, number>(); // function -> first turn where it is available
  const emptyAllowed = new Set<number>();
  for (const [k, fns] of Object.entries(c.missed_function ?? {})) {
    const t = Number(k);
    if (t >= turns) fail('malformed', `missed_function turn ${t} is beyond the last turn ${turns - 1}`);
    emptyAllowed.add(t);
    // BFCL's shape: the turn before the function arrives (the holding turn) has no call
    if (t > 0) emptyAllowed.add(t - 1);
    for (const f of fns) {
      if (!all.has(f))
        fail('unknown-tool', `missed function ${snippet(f, 60)} is not a method of the involved classes`);
      missedFrom.set(f, Math.min(missedFrom.get(f) ?? t, t));
    }
  }
  const missParam = c.category === 'miss_param';

  const parsed: ParsedCall[][] = [];
  let total = 0;
  for (let t = 0; t < turns; t++) {
    const calls = c.ground_truth[t]!;
    if (calls.length > limits.callsPerTurn.max) {
      fail(
        'too-many-calls',
        `turn ${t} has ${calls.length} calls; at most ${limits.callsPerTurn.max} are allowed`,
      );
    }
    if (
      calls.length < limits.callsPerTurn.min &&
      !(calls.length === 0 && (emptyAllowed.has(t) || missParam))
    ) {
      fail(
        'too-few-calls',
        `turn ${t} has ${calls.length} calls; at least ${limits.callsPerTurn.min} are required`,
      );
    }
    const turnCalls: ParsedCall[] = [];
    calls.forEach((src, i) => {
      const r = parseCall(src);
      if (!r.ok) fail('unparseable-call', `ground_truth[${t}][${i}]: ${r.reason}`);
      const name = r.call.name;
      if (!all.has(name)) {
        fail(
          'unknown-tool',
          `ground_truth[${t}][${i}]: ${snippet(name, 60)} is not a method of the involved classes`,
        );
      }
      if (excluded.has(name))
        fail('unknown-tool', `ground_truth[${t}][${i}]: ${name} is an excluded function`);
      const from = missedFrom.get(name);
      if (from !== undefined && t < from) {
        fail('unknown-tool', `ground_truth[${t}][${i}]: ${name} is withheld until turn ${from}`);
      }
      turnCalls.push(r.call);
    });
    total += calls.length;
    parsed.push(turnCalls);
  }
  if (total === 0) fail('too-few-calls', 'the task has no ground-truth call');

  checkJson(c.initial_config, 'initial_config', limits);
  parsed.forEach((turn, t) => {
    turn.forEach((call, i) => {
      const at = `ground_truth[${t}][${i}] ${call.name}`;
      for (const [j, a] of call.args.entries()) checkLiteral(a, `${at} argument ${j}`, limits);
      for (const kw of call.kwargs) checkLiteral(kw.value, `${at} argument ${kw.name}`, limits);
    });
  });
  return parsed;
}
