// What PostgreSQL's projections say about a campaign's progress: its steps (declared vs counted
// groups), the batches of its oldest open step, its planned steps and its unfinished syntheses.
// These answer with no worker and no workflow (`rods campaign status` of a finished campaign).
import type pg from 'pg';
import { legacySynthesisId, synthesisId } from '../domain/ids.js';
import type { SynthesisView, WaitingFor } from './report.js';

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

export async function stepProgress(db: pg.Pool, campaignId: string): Promise<StepProgressView> {
  const closed = await db.query<{ step: number; closed_at: Date }>(
    `select step, closed_at from steps where campaign_id = $1 and closed_at is not null
      order by step desc limit 1`,
    [campaignId],
  );
  const lastClosedStep = closed.rows[0]?.step ?? 0;
  const planned = await db.query<{ step: number | null }>(
    'select max(step) as step from campaign_plans where campaign_id = $1',
    [campaignId],
  );
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
    lastPlannedStep: planned.rows[0]?.step ?? 0,
    oldest,
    batches,
  };
}

/** What the oldest open step waits for, from its counts and its batches. */
export function waitingFor(
  oldest: StepRowView,
  batches: readonly { closes: boolean; status: string }[],
): WaitingFor[] {
  const out: WaitingFor[] = [];
  const counted = oldest.appliedGroups + oldest.rejectedGroups;
  if (batches.length === 0 && counted === 0) out.push('trainer-batches');
  else if (!batches.some((b) => b.closes) && oldest.declaredGroups === null) out.push('trainer-close');
  if (batches.some((b) => b.status === 'accepted')) out.push('unpublished-batches');
  const closingPublished = batches.some((b) => b.closes && b.status !== 'accepted');
  if (oldest.declaredGroups === null) {
    if (closingPublished) out.push('aggregator-declare');
  } else if (counted < oldest.declaredGroups) out.push('aggregator-groups');
  else if (!oldest.closedAt) out.push('aggregator-close');
  return out;
}

/**
 * Syntheses of the campaign that have no outcome yet: selected seeds (SeedSelected) without a
 * CandidateValidated or CandidateRejected, with when they were selected and started.
 */
export async function unfinishedSyntheses(db: pg.Pool, campaignId: string): Promise<SynthesisView[]> {
  const { rows } = await db.query<{
    type: string;
    synthesis_id: string | null;
    seed_task_id: string | null;
    step: string | null;
    recorded_at: Date;
  }>(
    `select type, payload ->> 'synthesisId' as synthesis_id, payload ->> 'seedTaskId' as seed_task_id,
            payload ->> 'step' as step, recorded_at
       from events
      where payload ->> 'campaignId' = $1
        and type in ('SeedSelected', 'SynthesisStarted', 'CandidateValidated', 'CandidateRejected')
      order by transaction_id, position`,
    [campaignId],
  );
  const open = new Map<string, SynthesisView>();
  const aliases = new Map<string, string>();
  const done = new Set<string>();
  for (const r of rows) {
    if (r.type === 'SeedSelected' && r.seed_task_id && r.step !== null) {
      // The run's id in either form (a campaign started before ids were made injective keeps its own).
      const id = synthesisId(campaignId, Number(r.step), r.seed_task_id);
      aliases.set(legacySynthesisId(campaignId, Number(r.step), r.seed_task_id), id);
      open.set(id, {
        synthesisId: id,
        seedTaskId: r.seed_task_id,
        step: Number(r.step),
        selectedAt: r.recorded_at.toISOString(),
        startedAt: null,
        runningS: 0,
      });
    } else if (r.type === 'SynthesisStarted' && r.synthesis_id) {
      const s = open.get(aliases.get(r.synthesis_id) ?? r.synthesis_id);
      if (s) {
        s.startedAt = r.recorded_at.toISOString();
        s.synthesisId = r.synthesis_id;
      }
    } else if (r.synthesis_id) done.add(aliases.get(r.synthesis_id) ?? r.synthesis_id);
  }
  return [...open.entries()].filter(([id]) => !done.has(id)).map(([, s]) => s);
}

/** Events in the store after a relay cursor: all of them, and the campaign's. */
export async function eventsAfter(
  db: pg.Pool,
  campaignId: string,
  cursor: { transactionId: string; position: number },
  cap: number,
): Promise<{ events: number; capped: boolean; campaignEvents: number; oldestAt: string | null }> {
  const all = await db.query<{ n: number; oldest: Date | null }>(
    `select count(*)::bigint as n, min(recorded_at) as oldest from (
       select recorded_at from events where (transaction_id, position) > ($1::xid8, $2::bigint)
        order by transaction_id, position limit $3) e`,
    [cursor.transactionId, cursor.position, cap + 1],
  );
  const mine = await db.query<{ n: number }>(
    `select count(*)::bigint as n from (
       select 1 from events where payload ->> 'campaignId' = $3
          and (transaction_id, position) > ($1::xid8, $2::bigint) limit $4) e`,
    [cursor.transactionId, cursor.position, campaignId, cap + 1],
  );
  const n = all.rows[0]?.n ?? 0;
  return {
    events: Math.min(n, cap),
    capped: n > cap,
    campaignEvents: Math.min(mine.rows[0]?.n ?? 0, cap),
    oldestAt: all.rows[0]?.oldest?.toISOString() ?? null,
  };
}

/** The aggregator's stored next offsets (the authority on where it resumes) per partition. */
export async function storedOffsets(
  db: pg.Pool,
  groupId: string,
  topic: string,
): Promise<Map<number, number>> {
  const { rows } = await db.query<{ partition: number; next_offset: number }>(
    'select partition, next_offset from aggregator_offsets where group_id = $1 and topic = $2',
    [groupId, topic],
  );
  return new Map(rows.map((r) => [r.partition, r.next_offset]));
}
