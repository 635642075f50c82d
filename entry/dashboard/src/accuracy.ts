// The held-out accuracy panel's data, shaped for its chart (pure: no DOM, unit-tested): one point
// per trainer step, overall accuracy with its 95 % interval and accuracy per category, in percent;
// and the step range the accuracy chart shares with the band composition chart.
import type { DashboardEvaluations, EvaluationSummary } from '../../../analysis/status/evaluations.js';

export type { DashboardEvaluations, EvaluationSummary };

export interface AccuracyPlot {
  /** Trainer steps, ascending, each once. */
  steps: number[];
  /** The evaluation drawn at each step. */
  drawn: EvaluationSummary[];
  /** Overall accuracy (%) at each step. */
  overall: (number | null)[];
  /** Its 95 % Wilson interval (%) at each step. */
  intervals: ([number, number] | null)[];
  /** Categories in the order they first appear, and accuracy (%) per category at each step. */
  categories: string[];
  byCategory: (number | null)[][];
  /** Evaluations not drawn: without a checkpoint, failed, nothing scored, or another drawn at their step. */
  notDrawn: number;
}

const pct = (x: number | null) => (x === null ? null : x * 100);

/** Which of two evaluations at one step is drawn: completed over running, then more tasks scored, then the later. */
function better(a: EvaluationSummary, b: EvaluationSummary): EvaluationSummary {
  const done = (e: EvaluationSummary) => (e.status === 'completed' ? 1 : 0);
  if (done(a) !== done(b)) return done(a) > done(b) ? a : b;
  if (a.overall.total !== b.overall.total) return a.overall.total > b.overall.total ? a : b;
  return b.startedAt >= a.startedAt ? b : a;
}

/**
 * One point per trainer step from the campaign's evaluations. A failed evaluation's accuracy is
 * of the tasks it scored before it stopped: it is listed in the table, not drawn; a running one
 * is drawn with the interval of what it scored so far.
 */
export function accuracyPlot(evaluations: readonly EvaluationSummary[]): AccuracyPlot {
  const at = new Map<number, EvaluationSummary>();
  for (const e of evaluations) {
    if (e.trainerStep === null || e.status === 'failed' || e.overall.total === 0) continue;
    const held = at.get(e.trainerStep);
    at.set(e.trainerStep, held ? better(held, e) : e);
  }
  const steps = [...at.keys()].sort((a, b) => a - b);
  const drawn = steps.map((s) => at.get(s)!);
  const categories = [...new Set(drawn.flatMap((e) => e.categories.map((c) => c.category)))];
  return {
    steps,
    drawn,
    overall: drawn.map((e) => pct(e.overall.accuracy)),
    intervals: drawn.map((e) => [e.overall.interval95[0] * 100, e.overall.interval95[1] * 100]),
    categories,
    byCategory: categories.map((name) =>
      drawn.map((e) => pct(e.categories.find((c) => c.category === name)?.accuracy ?? null)),
    ),
    notDrawn: evaluations.length - drawn.length,
  };
}

/**
 * The step range that holds every series given (so that two charts show the same steps), or
 * null when none has a step; a single step is widened by one either side.
 */
export function stepRange(...series: readonly (readonly number[])[]): [number, number] | null {
  const all = series.flat();
  if (all.length === 0) return null;
  const min = Math.min(...all);
  const max = Math.max(...all);
  return min === max ? [min - 1, max + 1] : [min, max];
}

/** "75.0 %" (or "-" for no accuracy). */
export function fmtPct(x: number | null): string {
  return x === null ? '-' : `${(x * 100).toFixed(1)} %`;
}

/** "[50.3, 92.1]": a 95 % interval in percent. */
export function fmtInterval([lo, hi]: readonly [number, number]): string {
  return `[${(lo * 100).toFixed(1)}, ${(hi * 100).toFixed(1)}]`;
}
