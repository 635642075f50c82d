// Evaluation of a checkpoint on BFCL's held-out multi-turn tasks, the pure part: the evaluation's
// id, accuracy per category from the scored tasks, and the intervals a comparison prints. Shared by
// the evaluation workflow's activities, `rods eval` and the dashboard. Sandbox-safe (no I/O).
import { sha256Of } from './sha256.js';

export interface EvaluationTask {
  taskId: string;
  category: string;
}

export interface TaskVerdict extends EvaluationTask {
  valid: boolean;
}

export interface CategoryAccuracy {
  category: string;
  correct: number;
  total: number;
}

/** z of a two-sided 95 % interval. */
export const Z95 = 1.959963984540054;

const hex = (b: Uint8Array) => Array.from(b, (x) => x.toString(16).padStart(2, '0')).join('');

/**
 * An evaluation's id: the campaign, the checkpoint (or `base` for an endpoint evaluated without
 * one), and a digest of the model and the task selection (the held-out split's description, or an
 * explicit task list): the same request resumes the same evaluation, another model or selection is
 * another one.
 */
export function evaluationIdOf(
  campaignId: string,
  checkpointId: string | null,
  model: string,
  selection: string,
): string {
  const key = `${model}\u001f${selection}`;
  return `${campaignId}~${checkpointId ?? 'base'}~${hex(sha256Of(key)).slice(0, 12)}`;
}

/** The selection part of an evaluation id for an explicit task list. */
export const taskListSelection = (tasks: readonly EvaluationTask[]) =>
  tasks.map((t) => `${t.category}/${t.taskId}`).join(',');

/**
 * Correct and total per category, in the order the categories first appear in `tasks`; a task
 * scored twice (it cannot be: its event id is derived) would count once, the first verdict.
 */
export function accuracyByCategory(
  tasks: readonly EvaluationTask[],
  verdicts: readonly TaskVerdict[],
): { categories: CategoryAccuracy[]; correct: number; total: number } {
  const verdict = new Map<string, boolean>();
  for (const v of verdicts) if (!verdict.has(v.taskId)) verdict.set(v.taskId, v.valid);
  const by = new Map<string, CategoryAccuracy>();
  for (const t of tasks) {
    const valid = verdict.get(t.taskId);
    if (valid === undefined) continue;
    let c = by.get(t.category);
    if (!c) {
      c = { category: t.category, correct: 0, total: 0 };
      by.set(t.category, c);
    }
    c.total += 1;
    if (valid) c.correct += 1;
  }
  const categories = [...by.values()];
  return {
    categories,
    correct: categories.reduce((s, c) => s + c.correct, 0),
    total: categories.reduce((s, c) => s + c.total, 0),
  };
}

/** Wilson score interval of a proportion (95 % by default); [0, 1] for no trials. */
export function wilson(correct: number, total: number, z = Z95): [number, number] {
  if (total <= 0) return [0, 1];
  const p = correct / total;
  const z2 = z * z;
  const centre = (p + z2 / (2 * total)) / (1 + z2 / total);
  const half = (z / (1 + z2 / total)) * Math.sqrt((p * (1 - p)) / total + z2 / (4 * total * total));
  return [Math.max(0, centre - half), Math.min(1, centre + half)];
}

/** A category's (or the overall) accuracy with its 95 % Wilson interval, as `rods eval` and the dashboard report it. */
export interface AccuracyRow extends CategoryAccuracy {
  /** null when no task of it was scored. */
  accuracy: number | null;
  interval95: [number, number];
}

export const accuracyRow = (c: CategoryAccuracy): AccuracyRow => ({
  category: c.category,
  correct: c.correct,
  total: c.total,
  accuracy: c.total > 0 ? c.correct / c.total : null,
  interval95: wilson(c.correct, c.total),
});

/**
 * Interval of the difference of two independent proportions (b - a), Newcombe's hybrid score
 * method from the two Wilson intervals (Newcombe 1998, method 10): unlike the Wald interval it
 * stays inside [-1, 1] and behaves at 0 % and 100 %, where small evaluation sets live.
 */
export function differenceInterval(a: CategoryAccuracy, b: CategoryAccuracy, z = Z95): [number, number] {
  const p1 = a.total > 0 ? a.correct / a.total : 0;
  const p2 = b.total > 0 ? b.correct / b.total : 0;
  const [l1, u1] = wilson(a.correct, a.total, z);
  const [l2, u2] = wilson(b.correct, b.total, z);
  const d = p2 - p1;
  const lo = d - Math.sqrt((p2 - l2) ** 2 + (u1 - p1) ** 2);
  const hi = d + Math.sqrt((u2 - p2) ** 2 + (p1 - l1) ** 2);
  return [Math.max(-1, lo), Math.min(1, hi)];
}

export interface ComparedCategory {
  category: string;
  a: CategoryAccuracy & { accuracy: number; interval: [number, number] };
  b: CategoryAccuracy & { accuracy: number; interval: [number, number] };
  /** b's accuracy minus a's, with its 95 % interval. */
  difference: number;
  differenceInterval: [number, number];
  /** The interval excludes 0. */
  significant: boolean;
}

const withInterval = (c: CategoryAccuracy) => ({
  ...c,
  accuracy: c.total > 0 ? c.correct / c.total : 0,
  interval: wilson(c.correct, c.total),
});

/** Per category present in either (and `overall`), a against b with 95 % intervals. */
export function compareAccuracy(
  a: readonly CategoryAccuracy[],
  b: readonly CategoryAccuracy[],
): ComparedCategory[] {
  const names = [...new Set([...a.map((c) => c.category), ...b.map((c) => c.category)])];
  const find = (list: readonly CategoryAccuracy[], category: string) =>
    list.find((c) => c.category === category) ?? { category, correct: 0, total: 0 };
  const sum = (list: readonly CategoryAccuracy[]): CategoryAccuracy => ({
    category: 'overall',
    correct: list.reduce((s, c) => s + c.correct, 0),
    total: list.reduce((s, c) => s + c.total, 0),
  });
  const rows = names.map((n) => [find(a, n), find(b, n)] as const);
  rows.push([sum(a), sum(b)]);
  return rows.map(([x, y]) => {
    const ax = withInterval(x);
    const by = withInterval(y);
    const interval = differenceInterval(x, y);
    return {
      category: x.category,
      a: ax,
      b: by,
      difference: by.accuracy - ax.accuracy,
      differenceInterval: interval,
      significant: interval[0] > 0 || interval[1] < 0,
    };
  });
}
