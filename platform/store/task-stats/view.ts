// Reading the per-task statistics (the `rods stats` view).

import type pg from 'pg';
import type { Band } from '../../../domain/band.js';
import type { TaskStats } from '../../../schemas/types.generated.js';
import { countsOf } from '../db.js';

export interface TaskStatsView {
  campaignId: string;
  taskId: string;
  groups: number;
  rollouts: number;
  mean: number;
  variance: number;
  latestMean: number;
  latestVariance: number;
  ewma: number;
  phi: number;
  band: Band;
  lastStep: number;
}

/** The statistics columns of a `task_stats` row (platform/store/migrations/0003_aggregator.sql). */
export interface TaskStatsRow {
  task_id: string;
  groups: number;
  rollouts: number;
  mean: number;
  m2: number;
  latest_mean: number;
  latest_variance: number;
  ewma: number;
  signal: number;
  phi: number;
  band: Band;
  last_step: number;
}

export async function queryStats(
  db: pg.Pool,
  filter: { campaignId: string; taskId?: string; band?: Band },
): Promise<TaskStatsView[]> {
  const { rows } = await db.query<TaskStatsView>(
    `select campaign_id as "campaignId", task_id as "taskId", groups, rollouts, mean,
            case when rollouts > 0 then greatest(m2 / rollouts, 0) else 0 end as variance,
            latest_mean as "latestMean", latest_variance as "latestVariance", ewma, phi, band, last_step as "lastStep"
       from task_stats
      where campaign_id = $1 and ($2::text is null or task_id = $2) and ($3::text is null or band = $3)
      order by task_id`,
    [filter.campaignId, filter.taskId ?? null, filter.band ?? null],
  );
  return rows;
}

/** The TaskStats records (event schema shape) of a campaign's tasks, by task id. */
export async function loadTaskStats(
  db: pg.Pool | pg.PoolClient,
  campaignId: string,
  taskIds?: string[],
): Promise<Record<string, TaskStats>> {
  const { rows } = await db.query<TaskStatsRow>(
    `select task_id, groups, rollouts, mean, m2, latest_mean, latest_variance, ewma, signal, phi, band, last_step
       from task_stats where campaign_id = $1 and ($2::text[] is null or task_id = any($2::text[]))`,
    [campaignId, taskIds ?? null],
  );
  const out: Record<string, TaskStats> = {};
  for (const r of rows) {
    out[r.task_id] = {
      groupCount: r.groups,
      count: r.rollouts,
      mean: r.mean,
      m2: r.m2,
      variance: r.rollouts > 0 ? Math.max(0, r.m2 / r.rollouts) : 0,
      latestGroupMean: r.latest_mean,
      latestGroupVariance: r.latest_variance,
      ewma: r.ewma,
      signal: r.signal,
      phi: r.phi,
      band: r.band,
      lastStep: r.last_step,
    };
  }
  return out;
}

/** Tasks per campaign named and band (a gauge). */
export const tasksByBand = (db: pg.Pool, campaignIds: readonly string[]) =>
  countsOf(
    db,
    'select campaign_id, band as k, count(*) as n from task_stats where campaign_id = any($1) group by 1, 2',
    campaignIds,
  );

/** The policy version of the task's newest reward group (null: no group yet, or none named). */
export async function lastPolicyVersion(
  db: pg.Pool | pg.PoolClient,
  campaignId: string,
  taskId: string,
): Promise<string | null> {
  const { rows } = await db.query<{ v: string | null }>(
    'select last_policy_version as v from task_stats where campaign_id = $1 and task_id = $2',
    [campaignId, taskId],
  );
  return rows[0]?.v ?? null;
}

/** A task's counts, moments, band and last step, as replay and the benches compare them. */
export type TaskMoments = Pick<
  TaskStatsRow,
  'task_id' | 'groups' | 'rollouts' | 'mean' | 'm2' | 'band' | 'last_step'
>;

/** Each task's group and rollout counts, mean, M2, band and last step (what replay compares with). */
export async function statsMoments(db: pg.Pool, campaignId: string): Promise<TaskMoments[]> {
  const { rows } = await db.query<TaskMoments>(
    'select task_id, groups, rollouts, mean, m2, band, last_step from task_stats where campaign_id = $1',
    [campaignId],
  );
  return rows;
}

/** Each observed task's band. */
export async function taskBands(
  db: pg.Pool,
  campaignId: string,
  /** Only these tasks (the pool's active members); all when absent. */
  taskIds?: readonly string[],
): Promise<Map<string, string>> {
  const { rows } = await db.query<{ task_id: string; band: string }>(
    'select task_id, band from task_stats where campaign_id = $1 and ($2::text[] is null or task_id = any($2::text[]))',
    [campaignId, taskIds ?? null],
  );
  return new Map(rows.map((r) => [r.task_id, r.band]));
}
