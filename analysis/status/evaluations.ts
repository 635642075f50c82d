// What the dashboard shows of a campaign's evaluations on BFCL's held-out tasks: per evaluation
// the checkpoint and its trainer step, how it stands, and accuracy per category and overall with
// 95 % Wilson intervals (domain/evaluation.ts), ordered by trainer step so that the page draws
// them on the step axis of the band composition. Bounded: the newest EVALUATIONS_SHOWN only.
import { type AccuracyRow, accuracyRow } from '../../domain/evaluation.js';
import {
  type EvaluationView,
  evaluationViews,
  latestEvaluationIds,
} from '../../platform/store/events/evaluations.js';
import type { Queryable } from '../../platform/store/events/event-store.js';

/** Most evaluations one answer holds: the newest by start. */
export const EVALUATIONS_SHOWN = 200;

export interface EvaluationSummary {
  evaluationId: string;
  /** null: an endpoint evaluated without a checkpoint (a base model). */
  checkpointId: string | null;
  trainerStep: number | null;
  model: string;
  bfclEvalVersion: string;
  status: EvaluationView['status'];
  /** Why it failed (failed only). */
  reason: string | null;
  tasks: number;
  scored: number;
  startedAt: number;
  endedAt: number | null;
  categories: AccuracyRow[];
  overall: AccuracyRow;
}

export interface DashboardEvaluations {
  campaignId: string;
  /** The most evaluations an answer holds. */
  limit: number;
  /** The campaign has more evaluations than `limit`: the older ones are left out. */
  truncated: boolean;
  /** By trainer step (evaluations without a checkpoint first), then by start. */
  evaluations: EvaluationSummary[];
}

export function evaluationSummary(v: EvaluationView): EvaluationSummary {
  return {
    evaluationId: v.evaluationId,
    checkpointId: v.checkpointId,
    trainerStep: v.trainerStep,
    model: v.model,
    bfclEvalVersion: v.bfclEvalVersion,
    status: v.status,
    reason: v.reason,
    tasks: v.tasks,
    scored: v.scored,
    startedAt: v.startedAt,
    endedAt: v.endedAt,
    // The endpoint stays out (it may name an internal host); the page needs none of it.
    categories: v.categories.map(accuracyRow),
    overall: accuracyRow({ category: 'overall', correct: v.correct, total: v.total }),
  };
}

export async function dashboardEvaluations(
  db: Queryable,
  campaignId: string,
  limit = EVALUATIONS_SHOWN,
): Promise<DashboardEvaluations> {
  const { ids, more } = await latestEvaluationIds(db, campaignId, limit);
  const views = await evaluationViews(db, ids);
  const step = (v: EvaluationView) => v.trainerStep ?? -1;
  views.sort((a, b) => step(a) - step(b) || a.startedAt - b.startedAt);
  return { campaignId, limit, truncated: more, evaluations: views.map(evaluationSummary) };
}
