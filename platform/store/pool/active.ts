// The active pool as the trainer pulls it: task records from pool_members with the pool version
// (the ETag), read in one snapshot so that version and members agree.
import type pg from 'pg';
import { deliveredTask } from '../../../domain/delivered-task.js';

export interface PoolTask {
  /** The rods task id: rewards are reported under it. */
  taskId: string;
  origin: string;
  category: string;
  /** The BFCL task record as delivered (domain/delivered-task.ts). */
  task: unknown;
}

export interface ActivePool {
  campaignId: string;
  version: number;
  step: number;
  tasks: PoolTask[];
}

export async function poolVersion(db: pg.Pool, campaignId: string): Promise<number> {
  const { rows } = await db.query<{ version: number }>(
    'select version from pool_versions where campaign_id = $1',
    [campaignId],
  );
  return rows[0]?.version ?? 0;
}

export async function activePool(db: pg.Pool, campaignId: string): Promise<ActivePool> {
  const c = await db.connect();
  try {
    await c.query('begin isolation level repeatable read read only');
    const v = await c.query<{ version: number; step: number }>(
      'select version, step from pool_versions where campaign_id = $1',
      [campaignId],
    );
    const m = await c.query<{ task_id: string; origin: string; category: string; task: unknown }>(
      'select task_id, origin, category, task from pool_members where campaign_id = $1 and active order by task_id',
      [campaignId],
    );
    await c.query('commit');
    return {
      campaignId,
      version: v.rows[0]?.version ?? 0,
      step: v.rows[0]?.step ?? 0,
      tasks: m.rows.map((r) => ({
        taskId: r.task_id,
        origin: r.origin,
        category: r.category,
        task: deliveredTask(r.task_id, r.category, r.task),
      })),
    };
  } catch (e) {
    await c.query('rollback').catch(() => {});
    throw e;
  } finally {
    c.release();
  }
}
