// Contamination of the training pool by the evaluation set. A campaign's seeds are the first
// `seeds.perCategory` BFCL multi-turn tasks of each category; the evaluation set is the rest
// (bfcl-eval numbers its categories alike: miss_func_i, miss_param_i and long_context_i are
// base_i changed, so the same split of every category keeps each original on one side). A
// synthesized task that reproduces an evaluation task inflates exactly the score the method
// exists to raise, so it is compared with every evaluation task on two signals:
// - text: word n-grams of the user turns shared with the evaluation task, as a share of the
//   smaller of the two sets (a copy, a copy with a turn added, or a subset of the evaluation
//   task's turns all score high). Measured on bfcl-eval 2026.3.23: the 400 seeds' nearest of
//   the other 400 share at most 0.04 of their 5-grams;
// - calls and state: the same ground-truth calls (parsed, so spacing and keyword order do not
//   matter; turn boundaries ignored) from the same initial state: a paraphrase of an evaluation
//   task is that task however its words are changed.
// Pure: the evaluation tasks are fetched and fingerprinted by activities/eval-set.ts.
import { literalToJson, parseCall } from './call-parser.js';
import type { CandidateTask } from './candidate.js';
import { canonicalJson } from './canonical-json.js';
import { userWords, wordGrams } from './near-duplicate.js';

export interface ContaminationRule {
  /** Words per n-gram of the text signal. */
  ngram: number;
  /** A shared n-gram share at or above this is contamination. */
  textOverlap: number;
  /** The same ground-truth calls from the same initial state is contamination. */
  sameCallsAndState: boolean;
}

export interface TaskFingerprint {
  grams: ReadonlySet<string>;
  /** Canonical JSON of the parsed calls in order. */
  calls: string;
  /** Canonical JSON of the initial state. */
  state: string;
}

export interface EvalTask {
  id: string;
  fingerprint: TaskFingerprint;
}

export interface Overlap {
  textOverlap: number;
  sameCalls: boolean;
  sameState: boolean;
}

export interface ContaminationMatch extends Overlap {
  evalTaskId: string;
  contaminated: boolean;
}

type Comparable = Pick<CandidateTask, 'question' | 'ground_truth' | 'initial_config'>;

// A call as its parsed form: `cd(folder = "a")` and `cd(folder='a')` are one call; a call the
// parser refuses is kept as its trimmed text.
function canonicalCall(source: string): unknown {
  const p = parseCall(source);
  if (!p.ok) return source.trim();
  const kwargs = Object.fromEntries(p.call.kwargs.map((k) => [k.name, literalToJson(k.value)]));
  return [p.call.name, p.call.args.map(literalToJson), kwargs];
}

export function fingerprint(task: Comparable, ngram: number): TaskFingerprint {
  const words = userWords(task);
  const calls = (task.ground_truth ?? []).flat().filter((c) => typeof c === 'string');
  return {
    grams: words.length === 0 ? new Set() : wordGrams(words, ngram),
    calls: canonicalJson(calls.map(canonicalCall)),
    state: canonicalJson(task.initial_config ?? {}),
  };
}

export function overlap(a: TaskFingerprint, b: TaskFingerprint): Overlap {
  let shared = 0;
  const [small, large] = a.grams.size <= b.grams.size ? [a.grams, b.grams] : [b.grams, a.grams];
  for (const g of small) if (large.has(g)) shared++;
  return {
    textOverlap: small.size === 0 ? 0 : shared / small.size,
    sameCalls: a.calls === b.calls,
    sameState: a.state === b.state,
  };
}

export function isContaminated(o: Overlap, rule: ContaminationRule): boolean {
  return o.textOverlap >= rule.textOverlap || (rule.sameCallsAndState && o.sameCalls && o.sameState);
}

// Nearer: contaminated before clean, then more shared text, then more of calls and state shared.
const nearness = (m: ContaminationMatch) =>
  (m.contaminated ? 4 : 0) + m.textOverlap + (m.sameCalls ? 0.5 : 0) + (m.sameState ? 0.25 : 0);

/** The evaluation task nearest a task (ties: the first), or undefined for an empty set. */
export function nearestEvalTask(
  task: TaskFingerprint,
  evalSet: Iterable<EvalTask>,
  rule: ContaminationRule,
): ContaminationMatch | undefined {
  let best: ContaminationMatch | undefined;
  for (const e of evalSet) {
    const o = overlap(task, e.fingerprint);
    const m = { evalTaskId: e.id, ...o, contaminated: isContaminated(o, rule) };
    if (!best || nearness(m) > nearness(best)) best = m;
  }
  return best;
}

/** Why a task is rejected as eval-contamination: the evaluation task, the scores, the rule crossed. */
export function contaminationReason(m: ContaminationMatch, rule: ContaminationRule): string {
  const crossed: string[] = [];
  if (m.textOverlap >= rule.textOverlap) crossed.push(`${rule.ngram}-gram overlap >= ${rule.textOverlap}`);
  if (rule.sameCallsAndState && m.sameCalls && m.sameState) crossed.push('same calls from the same state');
  const yes = (b: boolean) => (b ? 'yes' : 'no');
  return (
    `copies evaluation task ${m.evalTaskId} (user-turn ${rule.ngram}-gram overlap ${m.textOverlap.toFixed(3)}, ` +
    `same ground-truth calls: ${yes(m.sameCalls)}, same initial state: ${yes(m.sameState)}): ${crossed.join('; ')}`
  );
}

export interface PoolTaskMatch extends ContaminationMatch {
  taskId: string;
  origin: string;
  category: string;
}

/** Each pool task's nearest evaluation task, nearest first (contaminated, then by shared text). */
export function poolContamination(
  tasks: readonly { taskId: string; origin: string; category: string; task: Comparable }[],
  evalSet: readonly EvalTask[],
  rule: ContaminationRule,
): { compared: number; contaminated: number; maxTextOverlap: number; nearest: PoolTaskMatch[] } {
  const nearest: PoolTaskMatch[] = [];
  for (const t of tasks) {
    const m = nearestEvalTask(fingerprint(t.task, rule.ngram), evalSet, rule);
    if (m) nearest.push({ taskId: t.taskId, origin: t.origin, category: t.category, ...m });
  }
  nearest.sort((a, b) => nearness(b) - nearness(a) || (a.taskId < b.taskId ? -1 : 1));
  return {
    compared: tasks.length,
    contaminated: nearest.filter((m) => m.contaminated).length,
    maxTextOverlap: nearest.reduce((x, m) => Math.max(x, m.textOverlap), 0),
    nearest,
  };
}
