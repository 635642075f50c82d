// What the steps tables say about a campaign's progress (`rods campaign status`, the campaign
// workflow's last closed step): its last closed step, and its oldest open one with the groups
// declared and counted for it and the batches accepted for it.

import type pg from 'pg';
import { lastPlannedStep } from '../campaign-plans.js';
import { countsOf } from '../db.js';
import type { Queryable } from '../events/event-store.js';

/** The latest step the aggregator closed for the campaign (0 when none). */
export async function lastClosedStep(db: Queryable, campaignId: string): Promise<number> {
  const { rows } = await db.query<{ step: string | null }>(
    'select max(step)::bigint as step from steps where campaign_id = $1 and closed_at is not null',
    [campaignId],
  );
  return Number(rows[0]?.step ?? 0);
}

export interface StepRowView {
  step: number;
  declaredGroups: number | null;
  appliedGroups: number;
  rejectedGroups: number;
  closedAt: string | null;
}

export interface StepProgressView {
  /** Highest closed step (0: none) and when it closed. */
  lastClosedStep: number;
  lastClosedAt: string | null;
  /** Highest step the campaign planned (campaign_plans). */
  lastPlannedStep: number;
  /** Oldest step not closed: a steps row still open, or a step batches were accepted for. */
  oldest: StepRowView | null;
  batches: { batchId: string; groups: number; closes: boolean; status: string; acceptedAt: string }[];
}

/** The campaign's last closed step, its oldest open one with its counts and batches, and its last planned step. */
export async function stepProgress(db: pg.Pool, campaignId: string): Promise<StepProgressView> {
  const closed = await db.query<{ step: number; closed_at: Date }>(
    `select step, closed_at from steps where campaign_id = $1 and closed_at is not null
      order by step desc limit 1`,
    [campaignId],
  );
  const lastClosedStep = closed.rows[0]?.step ?? 0;
  const planned = await lastPlannedStep(db, campaignId);
  // Steps close in order, so the oldest open one holds every later one. A step the trainer sent
  // batches for has no steps row until the aggregator counted one of its groups.
  const open = await db.query<{ step: number | null }>(
    `select least(
        (select min(step) from steps where campaign_id = $1 and closed_at is null),
        (select min(step) from ingestion_batches where campaign_id = $1 and step > $2)) as step`,
    [campaignId, lastClosedStep],
  );
  const step = open.rows[0]?.step ?? null;
  let oldest: StepRowView | null = null;
  let batches: StepProgressView['batches'] = [];
  if (step !== null) {
    const s = await db.query<{
      declared_groups: number | null;
      closed_at: Date | null;
      applied: number;
      rejected: number;
    }>(
      `select s.declared_groups, s.closed_at,
              coalesce(sum(p.groups_applied), 0)::bigint as applied,
              coalesce(sum(p.groups_rejected), 0)::bigint as rejected
         from (select $1::text as campaign_id, $2::bigint as step) k
         left join steps s on s.campaign_id = k.campaign_id and s.step = k.step
         left join step_progress p on p.campaign_id = k.campaign_id and p.step = k.step
        group by s.declared_groups, s.closed_at`,
      [campaignId, step],
    );
    const r = s.rows[0];
    oldest = {
      step,
      declaredGroups: r?.declared_groups ?? null,
      appliedGroups: r?.applied ?? 0,
      rejectedGroups: r?.rejected ?? 0,
      closedAt: r?.closed_at?.toISOString() ?? null,
    };
    const b = await db.query<{
      batch_id: string;
      groups: number;
      closes: boolean;
      status: string;
      created_at: Date;
    }>(
      `select batch_id, groups, closes, status, created_at from ingestion_batches
        where campaign_id = $1 and step = $2 order by created_at, batch_id`,
      [campaignId, step],
    );
    batches = b.rows.map((x) => ({
      batchId: x.batch_id,
      groups: x.groups,
      closes: x.closes,
      status: x.status,
      acceptedAt: x.created_at.toISOString(),
    }));
  }
  return {
    lastClosedStep,
    lastClosedAt: closed.rows[0]?.closed_at.toISOString() ?? null,
    lastPlannedStep: planned,
    oldest,
    batches,
  };
}

/** The last closed step of each campaign named (a gauge). */
export const lastClosedSteps = (db: pg.Pool, campaignIds: readonly string[]) =>
  countsOf(
    db,
    `select campaign_id, null as k, max(step) as n from steps
      where campaign_id = any($1) and closed_at is not null group by 1`,
    campaignIds,
  );

/** The summaries of the campaign's closed steps (of these steps only, when given), in step order. */
export async function stepSummaries(
  db: Queryable,
  campaignId: string,
  only?: readonly number[],
): Promise<{ step: number; closedAt: Date | null; summary: Record<string, unknown> | null }[]> {
  const { rows } = await db.query<{
    step: string;
    closed_at: Date | null;
    summary: Record<string, unknown> | null;
  }>(
    `select step, closed_at, summary from steps
      where campaign_id = $1 and summary is not null and ($2::bigint[] is null or step = any($2::bigint[]))
      order by step`,
    [campaignId, only ?? null],
  );
  return rows.map((r) => ({ step: Number(r.step), closedAt: r.closed_at, summary: r.summary }));
}

/** The campaign's steps up to `upTo`, in order, with when each closed (null: open). */
export async function stepRows(
  db: Queryable,
  campaignId: string,
  upTo: number,
): Promise<{ step: number; closedAt: Date | null }[]> {
  const { rows } = await db.query<{ step: string; closed_at: Date | null }>(
    'select step, closed_at from steps where campaign_id = $1 and step <= $2 order by step',
    [campaignId, upTo],
  );
  return rows.map((r) => ({ step: Number(r.step), closedAt: r.closed_at }));
}

/** The partitions of `topic` the aggregator counted groups of the campaign from. */
export async function groupPartitions(db: Queryable, campaignId: string, topic: string): Promise<number[]> {
  const { rows } = await db.query<{ partition: number }>(
    `select distinct partition from step_progress
      where campaign_id = $1 and topic = $2 and groups_applied + groups_rejected > 0 order by 1`,
    [campaignId, topic],
  );
  return rows.map((r) => r.partition);
}
