// The aggregator's rows in PostgreSQL, all written inside the batch's one transaction: the
// partition's lock and stored next offset (aggregator_offsets), and each task's statistics with
// its dedupe window (task_stats). State and consumed offset commit together or not at all.
import type pg from 'pg';
import type { TaskState } from '../domain/task-stats.js';
import type { TaskStatsRow } from './stats-query.js';

/** A task's statistics as stored, with its dedupe window. */
export interface StoredTask {
  campaignId: string;
  taskId: string;
  state: TaskState;
  recentEventIds: string[];
}

/** A task the batch applied groups to: its new statistics and what to store with them. */
export interface TaskUpdate extends StoredTask {
  lastEventId: string;
  policyVersion: string;
}

interface StoredRow extends TaskStatsRow {
  campaign_id: string;
  recent_means: number[];
  recent_event_ids: string[];
}

function fromRow(r: StoredRow): TaskState {
  return {
    groups: r.groups,
    moments: { n: r.rollouts, mean: r.mean, m2: r.m2 },
    latestMean: r.latest_mean,
    latestVariance: r.latest_variance,
    ewma: r.ewma,
    recentMeans: r.recent_means,
    lastStep: r.last_step,
    signal: r.signal,
    phi: r.phi,
    band: r.band,
  };
}

/**
 * Partition ownership for the length of the transaction (no write yet: see store/event-store.ts).
 * Two members briefly owning one partition during a rebalance serialise here.
 */
export async function lockPartition(
  client: pg.PoolClient,
  groupId: string,
  topic: string,
  partition: number,
): Promise<void> {
  await client.query('select pg_advisory_xact_lock(hashtextextended($1, 0))', [
    `rods-aggregator:${groupId}:${topic}:${partition}`,
  ]);
}

/** The partition's next offset to apply; records below it were applied already (-1: none stored). */
export async function storedNextOffset(
  client: pg.PoolClient,
  groupId: string,
  topic: string,
  partition: number,
): Promise<number> {
  const stored = await client.query<{ next_offset: number }>(
    'select next_offset from aggregator_offsets where group_id = $1 and topic = $2 and partition = $3',
    [groupId, topic, partition],
  );
  return stored.rows[0]?.next_offset ?? -1;
}

export async function storeNextOffset(
  client: pg.PoolClient,
  groupId: string,
  topic: string,
  partition: number,
  nextOffset: string,
): Promise<void> {
  await client.query(
    `insert into aggregator_offsets (group_id, topic, partition, next_offset) values ($1, $2, $3, $4)
     on conflict (group_id, topic, partition) do update set next_offset = excluded.next_offset, updated_at = now()`,
    [groupId, topic, partition, nextOffset],
  );
}

/** The stored next offsets of some partitions (where a member resumes after an assignment). */
export async function storedNextOffsets(
  db: pg.Pool,
  groupId: string,
  topic: string,
  partitions: readonly number[],
): Promise<{ partition: number; nextOffset: number }[]> {
  const { rows } = await db.query<{ partition: number; next_offset: number }>(
    'select partition, next_offset from aggregator_offsets where group_id = $1 and topic = $2 and partition = any($3::int[])',
    [groupId, topic, partitions],
  );
  return rows.map((r) => ({ partition: r.partition, nextOffset: r.next_offset }));
}

/** The current statistics of the tasks named (tasks never seen are absent). */
export async function loadTasks(
  client: pg.PoolClient,
  tasks: readonly { campaignId: string; taskId: string }[],
): Promise<StoredTask[]> {
  const key = (t: { campaignId: string; taskId: string }) => `${t.campaignId}\u0000${t.taskId}`;
  const pairs = [...new Map(tasks.map((t) => [key(t), t])).values()];
  const r = await client.query<StoredRow>(
    `select s.* from task_stats s
       join unnest($1::text[], $2::text[]) as k(campaign_id, task_id) using (campaign_id, task_id)`,
    [pairs.map((g) => g.campaignId), pairs.map((g) => g.taskId)],
  );
  return r.rows.map((row) => ({
    campaignId: row.campaign_id,
    taskId: row.task_id,
    state: fromRow(row),
    recentEventIds: row.recent_event_ids,
  }));
}

// Ragged arrays (recent means, recent ids) travel as PostgreSQL array literals, one per row.
const pgArray = (xs: readonly (string | number)[]) => `{${xs.join(',')}}`;

export async function upsertStats(client: pg.PoolClient, rows: readonly TaskUpdate[]): Promise<void> {
  if (rows.length === 0) return;
  const col = <T>(f: (r: TaskUpdate) => T) => rows.map(f);
  await client.query(
    `insert into task_stats (campaign_id, task_id, groups, rollouts, mean, m2, latest_mean, latest_variance, ewma,
        recent_means, last_step, signal, phi, band, last_event_id, recent_event_ids, last_policy_version, updated_at)
     select c, t, g, n, mean, m2, lm, lv, ewma, rm::float8[], ls, sig, phi, band, eid, ri::uuid[], pv, now()
       from unnest($1::text[], $2::text[], $3::bigint[], $4::bigint[], $5::float8[], $6::float8[], $7::float8[],
                   $8::float8[], $9::float8[], $10::text[], $11::bigint[], $12::float8[], $13::float8[], $14::text[],
                   $15::uuid[], $16::text[], $17::text[])
         as u(c, t, g, n, mean, m2, lm, lv, ewma, rm, ls, sig, phi, band, eid, ri, pv)
     on conflict (campaign_id, task_id) do update set
       groups = excluded.groups, rollouts = excluded.rollouts, mean = excluded.mean, m2 = excluded.m2,
       latest_mean = excluded.latest_mean, latest_variance = excluded.latest_variance, ewma = excluded.ewma,
       recent_means = excluded.recent_means, last_step = excluded.last_step, signal = excluded.signal,
       phi = excluded.phi, band = excluded.band, last_event_id = excluded.last_event_id,
       recent_event_ids = excluded.recent_event_ids, last_policy_version = excluded.last_policy_version,
       updated_at = now()`,
    [
      col((r) => r.campaignId),
      col((r) => r.taskId),
      col((r) => r.state.groups),
      col((r) => r.state.moments.n),
      col((r) => r.state.moments.mean),
      col((r) => r.state.moments.m2),
      col((r) => r.state.latestMean),
      col((r) => r.state.latestVariance),
      col((r) => r.state.ewma),
      col((r) => pgArray(r.state.recentMeans)),
      col((r) => r.state.lastStep),
      col((r) => r.state.signal),
      col((r) => r.state.phi),
      col((r) => r.state.band),
      col((r) => r.lastEventId),
      col((r) => pgArray(r.recentEventIds)),
      col((r) => r.policyVersion),
    ],
  );
}
