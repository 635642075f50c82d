// What `rods eval` and the dashboard read of an evaluation: its stream folded into one view (what
// was scored against what, accuracy per category so far, each task's outcome, how it ended).
import { accuracyByCategory, type CategoryAccuracy } from '../../../domain/evaluation.js';
import { streams } from '../../../domain/ids.js';
import type { EvaluationTaskScored } from '../../../schemas/types.generated.js';
import {
  EVENT_COLUMNS,
  type EventRow,
  type Queryable,
  readStreamOf,
  type TypedRecordedEvent,
  toEvents,
} from './event-store.js';

/** One scored task as EvaluationTaskScored records it, without the ids and time every event carries. */
export type TaskOutcome = Omit<
  EvaluationTaskScored,
  'eventId' | 'evaluationId' | 'campaignId' | 'occurredAt'
>;

export interface EvaluationView {
  evaluationId: string;
  campaignId: string;
  checkpointId: string | null;
  trainerStep: number | null;
  manifestRoot: string | null;
  endpoint: string;
  model: string;
  bfclEvalVersion: string;
  startedAt: number;
  /** running: not ended yet (or its workflow is gone: `rods eval run` again resumes it). */
  status: 'running' | 'completed' | 'failed';
  reason: string | null;
  tasks: number;
  scored: number;
  categories: CategoryAccuracy[];
  correct: number;
  total: number;
  /** Sum of the tasks' inference-and-check time (ms). */
  taskMs: number;
  endedAt: number | null;
  outcomes: TaskOutcome[];
}

const TYPES = [
  'EvaluationStarted',
  'EvaluationTaskScored',
  'EvaluationCompleted',
  'EvaluationFailed',
] as const;

type EvaluationEvent = TypedRecordedEvent<(typeof TYPES)[number]>;

/** The evaluation's view, or undefined when nothing was recorded under this id. */
export async function evaluationView(
  db: Queryable,
  evaluationId: string,
): Promise<EvaluationView | undefined> {
  return foldEvaluation(evaluationId, await readStreamOf(db, streams.evaluation(evaluationId), TYPES));
}

/** The views of these evaluations (one read for all), in the order of `ids`; unrecorded ids are left out. */
export async function evaluationViews(db: Queryable, ids: readonly string[]): Promise<EvaluationView[]> {
  if (ids.length === 0) return [];
  const { rows } = await db.query<EventRow>(
    `select ${EVENT_COLUMNS} from events
      where stream_id = any($1::text[]) and type = any($2::text[])
      order by stream_id, stream_version`,
    [ids.map(streams.evaluation), TYPES],
  );
  const byStream = new Map<string, EvaluationEvent[]>();
  for (const e of toEvents(rows) as EvaluationEvent[]) {
    const list = byStream.get(e.streamId) ?? [];
    list.push(e);
    byStream.set(e.streamId, list);
  }
  return ids.flatMap((id) => foldEvaluation(id, byStream.get(streams.evaluation(id)) ?? []) ?? []);
}

/** An evaluation's stream (its events in version order) folded into its view. */
function foldEvaluation(
  evaluationId: string,
  events: readonly EvaluationEvent[],
): EvaluationView | undefined {
  const started = events.find((e) => e.type === 'EvaluationStarted');
  if (started?.type !== 'EvaluationStarted') return undefined;
  const s = started.payload;
  const outcomes: TaskOutcome[] = [];
  let completedAt: number | null = null;
  let failed: { reason: string; at: number } | null = null;
  for (const e of events) {
    if (e.type === 'EvaluationTaskScored') {
      const p = e.payload;
      outcomes.push({
        taskId: p.taskId,
        category: p.category,
        valid: p.valid,
        errorType: p.errorType ?? null,
        error: p.error ?? null,
        turns: p.turns,
        toolCalls: p.toolCalls,
        promptTokens: p.promptTokens == null ? null : Number(p.promptTokens),
        completionTokens: p.completionTokens == null ? null : Number(p.completionTokens),
        durationMs: Number(p.durationMs),
      });
    } else if (e.type === 'EvaluationCompleted') completedAt = Number(e.payload.occurredAt);
    else if (e.type === 'EvaluationFailed')
      failed = { reason: e.payload.reason, at: Number(e.payload.occurredAt) };
  }
  const acc = accuracyByCategory(s.tasks, outcomes);
  // A failed evaluation run again to its end completes: the completion is what holds.
  const status = completedAt !== null ? 'completed' : failed ? 'failed' : 'running';
  return {
    evaluationId,
    campaignId: s.campaignId,
    checkpointId: s.checkpointId ?? null,
    trainerStep: s.trainerStep == null ? null : Number(s.trainerStep),
    manifestRoot: s.manifestRoot ?? null,
    endpoint: s.endpoint,
    model: s.model,
    bfclEvalVersion: s.bfclEvalVersion,
    startedAt: Number(s.occurredAt),
    status,
    reason: status === 'failed' ? failed!.reason : null,
    tasks: s.tasks.length,
    scored: outcomes.length,
    ...acc,
    taskMs: outcomes.reduce((t, o) => t + o.durationMs, 0),
    endedAt: completedAt ?? failed?.at ?? null,
    outcomes,
  };
}

/**
 * Which of these evaluations recorded anything (their stream exists): started, or ended before it
 * could start (EvaluationFailed alone). One index lookup per id.
 */
export async function recordedEvaluations(db: Queryable, ids: readonly string[]): Promise<Set<string>> {
  if (ids.length === 0) return new Set();
  const { rows } = await db.query<{ stream_id: string }>(
    'select stream_id from streams where stream_id = any($1::text[])',
    [ids.map(streams.evaluation)],
  );
  const recorded = new Set(rows.map((r) => r.stream_id));
  return new Set(ids.filter((id) => recorded.has(streams.evaluation(id))));
}

/** Ids of the recorded evaluations (of one campaign), oldest first. */
export async function evaluationIds(db: Queryable, campaignId?: string): Promise<string[]> {
  const { rows } = await db.query<{ id: string }>(
    `select payload->>'evaluationId' as id from events
      where type = 'EvaluationStarted' and ($1::text is null or payload->>'campaignId' = $1)
      order by transaction_id, position`,
    [campaignId ?? null],
  );
  return rows.map((r) => r.id);
}

/**
 * Ids of a campaign's newest `limit` evaluations (by start, oldest first of them), and whether it
 * has more: reads back from the campaign's newest events and stops at the limit.
 */
export async function latestEvaluationIds(
  db: Queryable,
  campaignId: string,
  limit: number,
): Promise<{ ids: string[]; more: boolean }> {
  const { rows } = await db.query<{ id: string }>(
    `select payload->>'evaluationId' as id from events
      where payload->>'campaignId' = $1 and type = 'EvaluationStarted'
      order by transaction_id desc, position desc
      limit $2`,
    [campaignId, limit + 1],
  );
  return {
    ids: rows
      .slice(0, limit)
      .map((r) => r.id)
      .reverse(),
    more: rows.length > limit,
  };
}
