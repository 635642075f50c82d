// Reading the per-task statistics (the `rods stats` view).
import type pg from 'pg';
import type { Band } from '../domain/band.js';

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
