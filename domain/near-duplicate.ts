// Near-duplicates among tasks: a candidate that rephrases a seed or an earlier candidate in a few
// words, with the same calls, teaches the policy nothing new and only spends pool room. Exact
// content hashes (candidate.ts) catch copies; this catches near-copies by the Jaccard similarity
// of two feature sets: word trigrams of the user turns (what is asked) and the call sequence
// (function names and their order, what is done). Exact Jaccard rather than a MinHash estimate:
// a campaign compares a candidate with at most a few thousand tasks of a few hundred features,
// which takes milliseconds, and an exact figure is what a rejection reason should carry. (The
// MinHash of the npm `bloom-filters` package draws its hash functions at random per process, so
// signatures made by two worker processes, or before and after a restart, could not be compared.)
// Pure and sandbox-safe.
import type { CandidateTask } from './candidate.js';

export interface TaskFeatures {
  /** Word trigrams of the user turns, lower-cased, punctuation dropped. */
  text: ReadonlySet<string>;
  /** Function names in call order, and each pair of consecutive calls. */
  calls: ReadonlySet<string>;
}

export interface Similarity {
  /** Mean of the text and call similarities: the figure compared with the threshold. */
  score: number;
  text: number;
  calls: number;
}

type Comparable = Pick<CandidateTask, 'question' | 'ground_truth'>;

/** The words of a task's user turns, lower-cased, punctuation dropped. */
export function userWords(task: Pick<CandidateTask, 'question'>): string[] {
  const out: string[] = [];
  for (const turn of task.question ?? [])
    for (const m of turn ?? []) {
      if (m?.role !== 'user' || typeof m.content !== 'string') continue;
      out.push(
        ...m.content
          .toLowerCase()
          .split(/[^\p{L}\p{N}]+/u)
          .filter(Boolean),
      );
    }
  return out;
}

// The function name of a call string such as `cd(folder='x')` or `TwitterAPI.post(...)`.
const callName = (call: string) => /^\s*([\w.]+)/.exec(call)?.[1] ?? call.trim();

/** The word n-grams of `words`; fewer than n words are one gram, the words joined. */
export function wordGrams(words: readonly string[], n: number): Set<string> {
  const grams = new Set<string>();
  if (words.length < n) grams.add(words.join(' '));
  for (let i = 0; i + n <= words.length; i++) grams.add(words.slice(i, i + n).join(' '));
  return grams;
}

export function taskFeatures(task: Comparable): TaskFeatures {
  const text = wordGrams(userWords(task), 3);
  const names = (task.ground_truth ?? [])
    .flat()
    .filter((c) => typeof c === 'string')
    .map(callName);
  const calls = new Set<string>();
  names.forEach((n, i) => {
    calls.add(`${i}:${n}`);
    if (i > 0) calls.add(`${names[i - 1]}>${n}`);
  });
  return { text, calls };
}

function jaccard(a: ReadonlySet<string>, b: ReadonlySet<string>): number {
  if (a.size === 0 && b.size === 0) return 1;
  let inter = 0;
  const [small, large] = a.size <= b.size ? [a, b] : [b, a];
  for (const x of small) if (large.has(x)) inter++;
  return inter / (a.size + b.size - inter);
}

export function similarity(a: TaskFeatures, b: TaskFeatures): Similarity {
  const text = jaccard(a.text, b.text);
  const calls = jaccard(a.calls, b.calls);
  return { score: (text + calls) / 2, text, calls };
}

/** The most similar of `others` (ties: the first), or undefined when there is none. */
export function nearestTask<T extends { features: TaskFeatures }>(
  features: TaskFeatures,
  others: Iterable<T>,
): { task: T; similarity: Similarity } | undefined {
  let best: { task: T; similarity: Similarity } | undefined;
  for (const o of others) {
    const s = similarity(features, o.features);
    if (!best || s.score > best.similarity.score) best = { task: o, similarity: s };
  }
  return best;
}
