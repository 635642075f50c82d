// Evaluation of a checkpoint on BFCL's held-out multi-turn tasks, the pure part: the evaluation's
// id, accuracy per category from the scored tasks, and the intervals a comparison prints. Shared by
// the evaluation workflow's activities, `rods eval` and the dashboard. Sandbox-safe (no I/O).
import { sha256Of } from './sha256.js';
import { SEED_CATEGORIES, type SeedCategory } from './task.js';

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

/** The selection part of an evaluation id for the held-out split (all categories and tasks by default). */
export const heldOutSelection = (
  categories: readonly string[] | undefined,
  perCategory: number | undefined,
) => `held-out;categories=${(categories ?? SEED_CATEGORIES).join(',')};perCategory=${perCategory ?? 'all'}`;

const MULTI_TURN_ID = /^multi_turn_(base|miss_func|miss_param|long_context)_\d+$/;

/** A BFCL multi-turn task id as a task (its category is in the id), or undefined when it is not one. */
export function multiTurnTask(taskId: string): EvaluationTask | undefined {
  const m = MULTI_TURN_ID.exec(taskId);
  return m ? { taskId, category: m[1]! } : undefined;
}

/** The endpoint serving the evaluated policy. Its API key stays in the worker's environment. */
export interface EvaluationEndpoint {
  /** `{category}` in it is replaced by each task's category (a server with a route per category). */
  baseUrl: string;
  model: string;
  /** The worker's environment variable holding the key: a key never enters a workflow's history. */
  apiKeyEnv?: string;
}

/** The evaluation workflow's input (workflows/evaluation.ts). */
export interface EvaluationInput {
  evaluationId: string;
  campaignId: string;
  /** The checkpoint evaluated (CheckpointSaved), or null for an endpoint without one (a base model). */
  checkpointId: string | null;
  endpoint: EvaluationEndpoint;
  /** Explicit tasks (a known-answer test); default the held-out split, every category's tasks past the campaign's seeds. */
  tasks?: EvaluationTask[];
  /** Categories of the held-out split (default all four). */
  categories?: SeedCategory[];
  /** At most this many held-out tasks per category (default all). */
  perCategory?: number;
  /** Tasks scored at once (default 1). */
  concurrency?: number;
  /** bfcl-eval's step limit per user turn (default bfcl-eval's). */
  maxStepsPerTurn?: number;
  /** Attempts at a task whose endpoint fails (HTTP 502/504 from the executor) before the evaluation ends with the reason (default 5). */
  endpointAttempts?: number;
}

/** What to evaluate and how: `rods eval run`'s flags, or a campaign's `evaluation` setting for a checkpoint. */
export type EvaluationRequest = Omit<EvaluationInput, 'evaluationId'>;

/**
 * The evaluation workflow's input for a request, named by evaluationIdOf. `rods eval run` and the
 * campaign's evaluation on checkpoint both build it here, so the same campaign, checkpoint, model
 * and selection name one evaluation whichever of them starts it.
 */
export function evaluationInputOf(r: EvaluationRequest): EvaluationInput {
  const selection = r.tasks ? taskListSelection(r.tasks) : heldOutSelection(r.categories, r.perCategory);
  return {
    evaluationId: evaluationIdOf(r.campaignId, r.checkpointId, r.endpoint.model, selection),
    ...r,
    endpoint: { ...r.endpoint, baseUrl: r.endpoint.baseUrl.replace(/\/+$/, '') },
    concurrency: r.concurrency ?? 1,
    endpointAttempts: r.endpointAttempts ?? 5,
  };
}

/**
 * Why an evaluation endpoint's URL cannot be used (`{category}` already replaced), or undefined:
 * it must be an http(s) URL without credentials (the URL is recorded in EvaluationStarted).
 */
export function endpointUrlIssue(url: string): string | undefined {
  let u: URL;
  try {
    u = new URL(url);
  } catch {
    return 'is not a URL';
  }
  if (u.protocol !== 'http:' && u.protocol !== 'https:') return 'must be an http:// or https:// URL';
  if (u.username || u.password)
    return "must not carry credentials (it is recorded): give the key in a worker's environment variable (--api-key-env, evaluation.apiKeyEnv)";
  return undefined;
}

/** The names a campaign's evaluation setting may use for the checkpoint it evaluates. */
export const CHECKPOINT_PLACEHOLDERS = ['checkpoint', 'step', 'run'] as const;

/** The recorded checkpoint an evaluation on checkpoint is for. */
export interface CheckpointRef {
  checkpointId: string;
  trainerStep: number;
  runId: string;
}

/** The `{name}` placeholders of a template that are not in `allowed`. */
export const unknownPlaceholders = (template: string, allowed: readonly string[]): string[] =>
  [...template.matchAll(/\{([^{}]*)\}/g)].map((m) => m[1]!).filter((n) => !allowed.includes(n));

/** `template` with `{checkpoint}`, `{step}` and `{run}` replaced by the checkpoint's (through `encode`). */
export function fillCheckpoint(
  template: string,
  c: CheckpointRef,
  encode: (value: string) => string = (v) => v,
): string {
  const value = { checkpoint: c.checkpointId, step: String(c.trainerStep), run: c.runId };
  return template.replace(/\{(checkpoint|step|run)\}/g, (_m, name: keyof typeof value) =>
    encode(value[name]),
  );
}

/** A campaign's `evaluation` setting (domain/campaign-config.ts EvaluationConfigSchema), what a checkpoint's evaluation takes of it. */
export interface CheckpointEvaluationSettings {
  /** May hold {checkpoint}, {step}, {run} and {category}. */
  baseUrl: string;
  /** May hold {checkpoint}, {step} and {run}. */
  model: string;
  apiKeyEnv?: string | undefined;
  tasks?: string[] | undefined;
  categories?: SeedCategory[] | undefined;
  perCategory?: number | undefined;
  concurrency?: number | undefined;
  maxStepsPerTurn?: number | undefined;
  endpointAttempts?: number | undefined;
}

/**
 * The evaluation of a recorded checkpoint under a campaign's `evaluation` setting: what `rods eval
 * run --checkpoint` with the same endpoint, model and selection would start (the same id). The
 * checkpoint's names are percent-encoded into the URL, so an id cannot change the URL's shape.
 */
export function checkpointEvaluationInput(
  campaignId: string,
  checkpoint: CheckpointRef,
  s: CheckpointEvaluationSettings,
): EvaluationInput {
  const tasks = s.tasks?.map((id) => {
    const t = multiTurnTask(id);
    if (!t) throw new Error(`evaluation.tasks: ${JSON.stringify(id)} is not a BFCL multi-turn task id`);
    return t;
  });
  return evaluationInputOf({
    campaignId,
    checkpointId: checkpoint.checkpointId,
    endpoint: {
      baseUrl: fillCheckpoint(s.baseUrl, checkpoint, encodeURIComponent),
      model: fillCheckpoint(s.model, checkpoint),
      ...(s.apiKeyEnv ? { apiKeyEnv: s.apiKeyEnv } : {}),
    },
    ...(tasks ? { tasks } : {}),
    ...(s.categories ? { categories: s.categories } : {}),
    ...(s.perCategory !== undefined ? { perCategory: s.perCategory } : {}),
    ...(s.concurrency !== undefined ? { concurrency: s.concurrency } : {}),
    ...(s.maxStepsPerTurn !== undefined ? { maxStepsPerTurn: s.maxStepsPerTurn } : {}),
    ...(s.endpointAttempts !== undefined ? { endpointAttempts: s.endpointAttempts } : {}),
  });
}

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
