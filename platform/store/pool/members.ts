// Reads of the pool's members by id: the gateway's check that rewards name pool tasks, and which
// campaigns know a task (a lineage lookup without a campaign, or a 404 that says where it is).
import type pg from 'pg';
import type { Queryable } from '../events/event-store.js';
import { taskKey } from '../task-stats/state.js';

/** Which of `taskIds` are (or were) members of the campaign's pool. */
export async function poolMembersAmong(
  db: Queryable,
  campaignId: string,
  taskIds: readonly string[],
): Promise<string[]> {
  const { rows } = await db.query<{ task_id: string }>(
    'select task_id from pool_members where campaign_id = $1 and task_id = any($2::text[])',
    [campaignId, taskIds],
  );
  return rows.map((r) => r.task_id);
}

/** The campaign's pool members delivered under these BFCL ids (domain/delivered-task.ts deliveredId): id -> rods task id. */
export async function poolMembersByBfclId(
  db: Queryable,
  campaignId: string,
  bfclIds: readonly string[],
): Promise<Map<string, string>> {
  const { rows } = await db.query<{ task_id: string; bfcl_id: string }>(
    'select task_id, bfcl_id from pool_members where campaign_id = $1 and bfcl_id = any($2::text[])',
    [campaignId, bfclIds],
  );
  return new Map(rows.map((r) => [r.bfcl_id, r.task_id]));
}

/** The campaign's generated pool members (retired and pruned ones too) with their category and record. */
export async function generatedMemberTasks(
  db: Queryable,
  campaignId: string,
): Promise<{ taskId: string; category: string; task: unknown }[]> {
  const { rows } = await db.query<{ task_id: string; category: string; task: unknown }>(
    `select task_id, category, task from pool_members where campaign_id = $1 and origin = 'generated' order by task_id`,
    [campaignId],
  );
  return rows.map((r) => ({ taskId: r.task_id, category: r.category, task: r.task }));
}

/** Which of these tasks were ever in their campaign's pool (taskKey of each). */
export async function everInPool(
  client: pg.PoolClient,
  tasks: readonly { campaignId: string; taskId: string }[],
): Promise<Set<string>> {
  if (tasks.length === 0) return new Set();
  const { rows } = await client.query<{ campaign_id: string; task_id: string }>(
    `select m.campaign_id, m.task_id from pool_members m
       join unnest($1::text[], $2::text[]) as k(campaign_id, task_id) using (campaign_id, task_id)`,
    [tasks.map((t) => t.campaignId), tasks.map((t) => t.taskId)],
  );
  return new Set(rows.map((r) => taskKey(r.campaign_id, r.task_id)));
}

/** The task record of a pool member (as seeded or injected), if the task was ever in the pool. */
export async function memberTask<T>(
  db: Queryable,
  campaignId: string,
  taskId: string,
): Promise<T | undefined> {
  const { rows } = await db.query<{ task: T }>(
    'select task from pool_members where campaign_id = $1 and task_id = $2',
    [campaignId, taskId],
  );
  return rows[0]?.task;
}

/** Every task ever in the campaign's pool. */
export async function everPoolMembers(db: Queryable, campaignId: string): Promise<string[]> {
  const { rows } = await db.query<{ task_id: string }>(
    'select task_id from pool_members where campaign_id = $1',
    [campaignId],
  );
  return rows.map((r) => r.task_id);
}

/** An active member's row: id, origin, parents and task record. */
export interface ActiveMemberRow<T> {
  task_id: string;
  origin: string;
  parents: string[];
  task: T;
}

/** The campaign's active pool members, by task id. */
export async function activeMemberRows<T>(db: Queryable, campaignId: string): Promise<ActiveMemberRow<T>[]> {
  const { rows } = await db.query<ActiveMemberRow<T>>(
    'select task_id, origin, parents, task from pool_members where campaign_id = $1 and active order by task_id',
    [campaignId],
  );
  return rows;
}

/**
 * The campaigns that know `taskId`: as a pool member (seeded or injected, retired included) or as a
 * validated candidate. Reads the projections by task id (migrations/0015), never the event log.
 */
export async function campaignsOfTask(db: Queryable, taskId: string): Promise<string[]> {
  const { rows } = await db.query<{ campaign_id: string }>(
    `select campaign_id from pool_members where task_id = $1
     union
     select campaign_id from candidates where candidate_id = $1 and status in ('validated', 'injected')
     order by 1`,
    [taskId],
  );
  return rows.map((r) => r.campaign_id);
}
