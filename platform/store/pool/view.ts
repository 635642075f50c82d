// A campaign's pool at a glance: version, active members by origin and band, queue, retired and
// pruned counts (used by `rods campaign status`, `rods pool` and the gateway). The counts come from
// pool_member_counts and candidate_counts (kept by triggers, migration 0020): a view reads the
// active members and a handful of counts, not every task the campaign ever had.
import { countsOf, type Pool } from '../db.js';
import { taskBands } from '../task-stats/view.js';

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
  // Bands come from the statistics' owner; the active members are at most the pool's size.
  const members = await pool.query<{ task_id: string; origin: string }>(
    'select task_id, origin from pool_members where campaign_id = $1 and active',
    [campaignId],
  );
  const bands = await taskBands(
    pool,
    campaignId,
    members.rows.map((r) => r.task_id),
  );
  const removed = await pool.query<{ state: string; n: number }>(
    `select state, sum(n)::int as n from pool_member_counts
      where campaign_id = $1 and state <> 'active' group by 1`,
    [campaignId],
  );
  const cands = await pool.query<{ status: string; n: number }>(
    'select status, n::int as n from candidate_counts where campaign_id = $1 and n > 0',
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
    retired: removed.rows.find((r) => r.state === 'retired')?.n ?? 0,
    pruned: removed.rows.find((r) => r.state === 'pruned')?.n ?? 0,
    candidates: Object.fromEntries(cands.rows.map((r) => [r.status, r.n])),
  };
  for (const r of members.rows) {
    const band = bands.get(r.task_id) ?? 'unobserved';
    view.active++;
    view.byOrigin[r.origin] = (view.byOrigin[r.origin] ?? 0) + 1;
    view.byBand[band] = (view.byBand[band] ?? 0) + 1;
    view.byOriginAndBand[r.origin] ??= {};
    view.byOriginAndBand[r.origin]![band] = (view.byOriginAndBand[r.origin]![band] ?? 0) + 1;
  }
  view.queueLength = view.candidates.validated ?? 0;
  return view;
}

/** Active pool members per campaign named and origin (a gauge). */
export const activeMembersByOrigin = (db: Pool, campaignIds: readonly string[]) =>
  countsOf(
    db,
    `select campaign_id, origin as k, count(*) as n from pool_members
      where campaign_id = any($1) and active group by 1, 2`,
    campaignIds,
  );

/** Candidates per campaign named and status (a gauge). */
export const candidatesByStatus = (db: Pool, campaignIds: readonly string[]) =>
  countsOf(
    db,
    'select campaign_id, status as k, count(*) as n from candidates where campaign_id = any($1) group by 1, 2',
    campaignIds,
  );

/** When each campaign's pool last changed. */
export async function poolChangedAt(db: Pool): Promise<Map<string, Date>> {
  const { rows } = await db.query<{ campaign_id: string; updated_at: Date }>(
    'select campaign_id, updated_at from pool_versions',
  );
  return new Map(rows.map((r) => [r.campaign_id, r.updated_at]));
}

export interface TaskMatch {
  taskId: string;
  origin: string;
  category: string;
  depth: number;
  active: boolean;
}

/** Pool tasks of a campaign whose id contains `q`, generated and deepest first. */
export async function findPoolTasks(
  db: Pool,
  campaignId: string,
  q: string,
  limit: number,
): Promise<TaskMatch[]> {
  const pattern = `%${q.replace(/[\\%_]/g, (c) => `\\${c}`)}%`;
  const { rows } = await db.query<TaskMatch>(
    `select task_id as "taskId", origin, category, depth, active from pool_members
      where campaign_id = $1 and task_id ilike $2
      order by (origin = 'generated') desc, depth desc, task_id limit $3`,
    [campaignId, pattern, limit],
  );
  return rows;
}

export interface CompositionRow {
  origin: string;
  /** Generations from the human seed (0 for a seed). */
  depth: number;
  active: number;
  retired: number;
  pruned: number;
}

/** The campaign's pool members by origin and depth: active, retired and pruned. */
export async function poolComposition(db: Pool, campaignId: string): Promise<CompositionRow[]> {
  const { rows } = await db.query<CompositionRow>(
    `select origin, depth,
            coalesce(sum(n) filter (where state = 'active'), 0)::int as active,
            coalesce(sum(n) filter (where state = 'retired'), 0)::int as retired,
            coalesce(sum(n) filter (where state = 'pruned'), 0)::int as pruned
       from pool_member_counts where campaign_id = $1 group by 1, 2 having sum(n) > 0 order by 2, 1`,
    [campaignId],
  );
  return rows;
}

/** The pool version of each campaign named (0 for one without a pool yet is left out). */
export async function poolVersions(db: Pool, campaignIds: readonly string[]): Promise<Map<string, number>> {
  const { rows } = await db.query<{ campaign_id: string; version: string }>(
    'select campaign_id, version from pool_versions where campaign_id = any($1::text[])',
    [campaignIds],
  );
  return new Map(rows.map((r) => [r.campaign_id, Number(r.version)]));
}

/** The campaign's newest generated task of this depth (active first), if any: benches pick a lineage with it. */
export async function newestGeneratedOfDepth(
  db: Pool,
  campaignId: string,
  depth: number,
): Promise<string | undefined> {
  const { rows } = await db.query<{ task_id: string }>(
    `select task_id from pool_members where campaign_id = $1 and origin = 'generated' and depth = $2
      order by active desc, added_step desc, task_id limit 1`,
    [campaignId, depth],
  );
  return rows[0]?.task_id;
}
