// A campaign's pool at a glance: version, active members by origin and band, queue, retired and
// pruned counts (used by `rods campaign status`, `rods pool` and the gateway).
import type { Pool } from '../db.js';

export interface PoolView {
  campaignId: string;
  poolVersion: number;
  step: number;
  active: number;
  byOrigin: Record<string, number>;
  byBand: Record<string, number>;
  byOriginAndBand: Record<string, Record<string, number>>;
  queueLength: number;
  retired: number;
  pruned: number;
  candidates: Record<string, number>;
}

export async function poolView(pool: Pool, campaignId: string): Promise<PoolView> {
  const v = await pool.query<{ version: number; step: number }>(
    'select version, step from pool_versions where campaign_id = $1',
    [campaignId],
  );
  const members = await pool.query<{
    origin: string;
    band: string | null;
    active: boolean;
    removed_rule: string | null;
    n: number;
  }>(
    `select m.origin, s.band, m.active, m.removed_rule, count(*)::int as n
       from pool_members m left join task_stats s on s.campaign_id = m.campaign_id and s.task_id = m.task_id
      where m.campaign_id = $1 group by 1, 2, 3, 4`,
    [campaignId],
  );
  const cands = await pool.query<{ status: string; n: number }>(
    'select status, count(*)::int as n from candidates where campaign_id = $1 group by 1',
    [campaignId],
  );
  const view: PoolView = {
    campaignId,
    poolVersion: v.rows[0]?.version ?? 0,
    step: v.rows[0]?.step ?? 0,
    active: 0,
    byOrigin: {},
    byBand: {},
    byOriginAndBand: {},
    queueLength: 0,
    retired: 0,
    pruned: 0,
    candidates: Object.fromEntries(cands.rows.map((r) => [r.status, r.n])),
  };
  for (const r of members.rows) {
    if (!r.active) {
      if (r.removed_rule === 'pruned') view.pruned += r.n;
      else view.retired += r.n;
      continue;
    }
    const band = r.band ?? 'unobserved';
    view.active += r.n;
    view.byOrigin[r.origin] = (view.byOrigin[r.origin] ?? 0) + r.n;
    view.byBand[band] = (view.byBand[band] ?? 0) + r.n;
    view.byOriginAndBand[r.origin] ??= {};
    view.byOriginAndBand[r.origin]![band] = (view.byOriginAndBand[r.origin]![band] ?? 0) + r.n;
  }
  view.queueLength = view.candidates.validated ?? 0;
  return view;
}
