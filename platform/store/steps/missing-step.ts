// A step that never closed while later steps did: the trainer lost its report, or skipped it.
// Steps close in order for the campaign (it plans step s only once s closed), and the gateway
// refuses a step behind the last closed one, so such a step would hold the campaign for ever.
// `missingStep` says whether a step is one, with what was received for it; `skipMissingStep`
// passes over it under the campaign's ingestion.missingSteps policy: in one transaction (under
// the same per-campaign lock that closes steps) the step is marked closed, summary `skipped`, and
// StepSkipped is appended to the campaign's steps stream (its id derives from the step, so a
// retried skip records nothing twice).
import type pg from 'pg';
import { eventIds, streams } from '../../../domain/ids.js';
import { append, type NewEvent, typedEvent } from '../events/event-store.js';
import { lockCampaignSteps } from './close.js';
import { describeRefusal, type StepRefusal, stepRefusal } from './refusals.js';

export interface MissingStep {
  campaignId: string;
  step: number;
  /** Closed steps after it, and the first and last of them. */
  laterClosed: number;
  laterFrom: number;
  laterTo: number;
  /** What the gateway accepted for the step: batches (none closing it) and their groups. */
  received: { batches: number; groups: number };
  /** The last refusal of a closing batch of the step (platform/store/steps/refusals.ts), if any. */
  refusal: StepRefusal | null;
}

interface GapRow {
  closed: boolean | null;
  declared: number | null;
  later_closed: number;
  later_from: number | null;
  later_to: number | null;
  batches: number;
  groups: number;
  closing: boolean;
}

async function gapRow(db: pg.Pool | pg.PoolClient, campaignId: string, step: number): Promise<GapRow> {
  const { rows } = await db.query<GapRow>(
    `select (select closed_at is not null from steps where campaign_id = $1 and step = $2) as closed,
            (select declared_groups from steps where campaign_id = $1 and step = $2)::bigint as declared,
            l.n as later_closed, l.first as later_from, l.last as later_to,
            b.n as batches, b.groups, b.closing
       from (select count(*)::int as n, min(step)::int as first, max(step)::int as last
               from steps where campaign_id = $1 and step > $2 and closed_at is not null) l,
            (select count(*)::int as n, coalesce(sum(groups), 0)::int as groups, coalesce(bool_or(closes), false) as closing
               from ingestion_batches where campaign_id = $1 and step = $2) b`,
    [campaignId, step],
  );
  return rows[0]!;
}

/**
 * The step as a missing one: not closed, no closing batch received or declared, and later steps
 * closed. Null otherwise (closed, or still coming: declared or closed by a batch in flight).
 */
export async function missingStep(
  db: pg.Pool | pg.PoolClient,
  campaignId: string,
  step: number,
): Promise<MissingStep | null> {
  const r = await gapRow(db, campaignId, step);
  if (r.closed || r.declared !== null || r.closing) return null;
  // Refused: the trainer's answer came, and its reporter does not send it again.
  const refusal = await stepRefusal(db, campaignId, step);
  if (r.later_closed === 0 && !refusal) return null;
  return {
    campaignId,
    step,
    laterClosed: r.later_closed,
    laterFrom: r.later_from ?? step,
    laterTo: r.later_to ?? step,
    received: { batches: r.batches, groups: r.groups },
    refusal,
  };
}

/** Whether the move-on policy passes over the step now: a refused one at once, else after `afterSteps` later steps. */
export const passable = (m: MissingStep, afterSteps: number): boolean =>
  m.refusal !== null || m.laterClosed >= afterSteps;

export function describeMissingStep(m: MissingStep): string {
  if (m.laterClosed === 0 && m.refusal) return `step ${m.step} never closed: ${describeRefusal(m.refusal)}`;
  const later =
    m.laterClosed === 1
      ? `step ${m.laterFrom} did`
      : `${m.laterClosed} later steps did (${m.laterFrom}-${m.laterTo})`;
  const received =
    m.received.batches === 0
      ? 'nothing was received for it'
      : `${m.received.batches} batch${m.received.batches === 1 ? '' : 'es'} (${m.received.groups} groups) were received for it, none closing it`;
  return `step ${m.step} never closed while ${later}; ${received}${m.refusal ? `; ${describeRefusal(m.refusal)}` : ''}`;
}

function stepSkipped(m: MissingStep, afterSteps: number, now: number): NewEvent {
  return typedEvent(
    'StepSkipped',
    {
      eventId: eventIds.stepSkipped(m.campaignId, m.step),
      campaignId: m.campaignId,
      step: m.step,
      reason: describeMissingStep(m),
      afterSteps,
      laterClosed: m.laterClosed,
      batches: m.received.batches,
      groups: m.received.groups,
      occurredAt: now,
    },
    { producer: 'rods-campaign' },
  );
}

/**
 * Passes over a missing step once `afterSteps` later steps closed, or at once when its closing
 * batch was refused: closes it as skipped and records StepSkipped. Returns the event's payload, or null when the step is not (or no longer)
 * missing or too few later steps closed.
 */
export async function skipMissingStep(
  pool: pg.Pool,
  campaignId: string,
  step: number,
  afterSteps: number,
  now: () => number = Date.now,
): Promise<Record<string, unknown> | null> {
  const client = await pool.connect();
  try {
    await client.query('begin');
    await lockCampaignSteps(client, campaignId);
    const gap = await missingStep(client, campaignId, step);
    if (!gap || !passable(gap, afterSteps)) {
      await client.query('rollback');
      return null;
    }
    const event = stepSkipped(gap, afterSteps, now());
    const payload = event.payload as { reason: string };
    await append(client, streams.steps(campaignId), 'any', [event]);
    await client.query(
      `insert into steps (campaign_id, step, closed_at, summary) values ($1, $2, now(), $3)
       on conflict (campaign_id, step) do update set closed_at = now(), summary = excluded.summary`,
      [campaignId, step, JSON.stringify({ skipped: true, reason: payload.reason, groupCount: 0 })],
    );
    await client.query('commit');
    return { ...event.payload };
  } catch (e) {
    await client.query('rollback').catch(() => {});
    throw e;
  } finally {
    client.release();
  }
}
