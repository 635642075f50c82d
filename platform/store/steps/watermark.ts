// The step watermark: whether every reward event of steps <= s is in the statistics (step s closed
// by the aggregator, none before it open). Read from the aggregator's steps and step_progress
// rows; the campaign workflow waits on it before planning a step.
import { setTimeout as sleep } from 'node:timers/promises';
import type pg from 'pg';

export interface WatermarkState {
  campaignId: string;
  step: number;
  reached: boolean;
  /** Steps <= step that are not closed yet (with what is known of them). */
  open: { step: number; declared: number | null; accounted: number }[];
}

/** Whether every reward event of steps <= `step` is reflected in the statistics (step closed, none before it open). */
export async function watermark(db: pg.Pool, campaignId: string, step: number): Promise<WatermarkState> {
  const { rows } = await db.query<{
    step: number;
    declared_groups: number | null;
    closed_at: Date | null;
    accounted: number;
  }>(
    `select s.step, s.declared_groups, s.closed_at,
            coalesce((select sum(groups_applied + groups_rejected) from step_progress p
                       where p.campaign_id = s.campaign_id and p.step = s.step), 0)::bigint as accounted
       from steps s where s.campaign_id = $1 and s.step <= $2 order by s.step`,
    [campaignId, step],
  );
  const target = rows.find((r) => r.step === step);
  const open = rows
    .filter((r) => !r.closed_at)
    .map((r) => ({ step: r.step, declared: r.declared_groups, accounted: r.accounted }));
  return { campaignId, step, reached: Boolean(target?.closed_at) && open.length === 0, open };
}

export class WatermarkTimeout extends Error {
  override name = 'WatermarkTimeout';
}

/** Waits until the watermark reaches `step` (the library call the campaign workflow uses). */
export async function waitForWatermark(
  db: pg.Pool,
  campaignId: string,
  step: number,
  opts: { timeoutMs?: number; pollMs?: number; signal?: AbortSignal } = {},
): Promise<WatermarkState> {
  const deadline = Date.now() + (opts.timeoutMs ?? Number.POSITIVE_INFINITY);
  for (;;) {
    const w = await watermark(db, campaignId, step);
    if (w.reached) return w;
    if (Date.now() >= deadline) {
      const detail = w.open.length
        ? w.open.map((o) => `step ${o.step}: ${o.accounted}/${o.declared ?? '?'} groups`).join(', ')
        : `step ${step} not seen yet`;
      throw new WatermarkTimeout(`campaign ${campaignId}: step ${step} not aggregated in time (${detail})`);
    }
    await sleep(opts.pollMs ?? 200, undefined, { signal: opts.signal });
  }
}

export interface ClosedThrough {
  /** Every step 1..step closed (a skipped step is closed) and none of 0..step open. */
  reached: boolean;
  /** The first step that holds it: open (with its counts) or never reported (no row). */
  waitsFor: { step: number; reported: boolean; declared: number | null; accounted: number } | null;
}

/**
 * Whether every step up to `step` is closed, gaps included: a step the trainer never got accepted
 * (its closing batch refused, or never sent) holds it until it closes or the missing-step policy
 * skips it. What a checkpoint's manifest needs (the campaign workflow waits step by step instead).
 */
export async function closedThrough(
  db: pg.Pool | pg.PoolClient,
  campaignId: string,
  step: number,
): Promise<ClosedThrough> {
  const { rows } = await db.query<{
    step: string;
    reported: boolean;
    declared: string | null;
    accounted: string;
  }>(
    `with first as (
       select least(
         (select min(step) from steps where campaign_id = $1 and step between 0 and $2 and closed_at is null),
         (select g from generate_series(1::bigint, $2::bigint) g
           where not exists (select 1 from steps s where s.campaign_id = $1 and s.step = g and s.closed_at is not null)
           limit 1)) as step)
     select first.step::text as step, s.step is not null as reported, s.declared_groups::text as declared,
            coalesce((select sum(groups_applied + groups_rejected) from step_progress p
                       where p.campaign_id = $1 and p.step = first.step), 0)::text as accounted
       from first left join steps s on s.campaign_id = $1 and s.step = first.step
      where first.step is not null`,
    [campaignId, step],
  );
  const r = rows[0];
  if (!r) return { reached: true, waitsFor: null };
  return {
    reached: false,
    waitsFor: {
      step: Number(r.step),
      reported: r.reported,
      declared: r.declared === null ? null : Number(r.declared),
      accounted: Number(r.accounted),
    },
  };
}
