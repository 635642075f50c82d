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
