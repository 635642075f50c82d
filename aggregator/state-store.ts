// The aggregator's rows in PostgreSQL, all written inside the batch's one transaction: the
// partition's lock and stored next offset (aggregator_offsets), and each task's statistics with
// its dedupe window (task_stats). State and consumed offset commit together or not at all.
import type pg from 'pg';
import type { TaskState } from '../domain/task-stats.js';
import type { TaskStatsRow } from '../store/task-stats.js';

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
  /** The ids this batch added to the window (recentEventIds ends with them), oldest first. */
  newEventIds: readonly string[];
}

/** What the task read asks of a cache of committed task states (aggregator/task-cache.ts). */
export interface CommittedTasks {
  /** The group count and last event id of the cached state, if any. */
  versionOf(key: string): { groups: number; lastEventId: string } | undefined;
  /** A copy of the cached state, for the batch to fold. */
  take(campaignId: string, taskId: string): StoredTask | undefined;
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

/** The key of a task's statistics and dedupe window (campaign and task id). */
export const taskKey = (campaignId: string, taskId: string) => `${campaignId}\u0000${taskId}`;

/**
 * The current statistics of the tasks named (tasks never seen are absent). With a cache, a task
 * whose stored group count and last event id match the cached ones comes from the cache
 * (aggregator/task-cache.ts); only the others are read in full.
 */
export async function loadTasks(
  client: pg.PoolClient,
  tasks: readonly { campaignId: string; taskId: string }[],
  cache?: CommittedTasks,
): Promise<StoredTask[]> {
  const pairs = [...new Map(tasks.map((t) => [taskKey(t.campaignId, t.taskId), t])).values()];
  if (!cache) return readTasks(client, pairs);
  const versions = pairs.map((p) => cache.versionOf(taskKey(p.campaignId, p.taskId)));
  const { rows } = await client.query<{ campaign_id: string; task_id: string; cached: boolean }>(
    `select s.campaign_id, s.task_id, (s.groups = k.groups and s.last_event_id = k.last_event_id) is true as cached
       from task_stats s
       join unnest($1::text[], $2::text[], $3::bigint[], $4::uuid[]) as k(campaign_id, task_id, groups, last_event_id)
      using (campaign_id, task_id)`,
    [
      pairs.map((p) => p.campaignId),
      pairs.map((p) => p.taskId),
      versions.map((v) => v?.groups ?? null),
      versions.map((v) => v?.lastEventId ?? null),
    ],
  );
  const out: StoredTask[] = [];
  const stale: { campaignId: string; taskId: string }[] = [];
  for (const r of rows) {
    const hit = r.cached ? cache.take(r.campaign_id, r.task_id) : undefined;
    if (hit) out.push(hit);
    else stale.push({ campaignId: r.campaign_id, taskId: r.task_id });
  }
  if (stale.length > 0) out.push(...(await readTasks(client, stale)));
  return out;
}

async function readTasks(
  client: pg.PoolClient,
  pairs: readonly { campaignId: string; taskId: string }[],
): Promise<StoredTask[]> {
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

/**
 * Writes the batch's tasks. The window travels as the ids the batch added: PostgreSQL appends them
 * to the stored window and keeps the newest `window` (as DedupeWindows did in memory), so a batch
 * does not send and re-parse up to 64 ids per task.
 */
export async function upsertStats(
  client: pg.PoolClient,
  rows: readonly TaskUpdate[],
  window: number,
): Promise<void> {
  if (rows.length === 0) return;
  const col = <T>(f: (r: TaskUpdate) => T) => rows.map(f);
  await client.query(
    `insert into task_stats (campaign_id, task_id, groups, rollouts, mean, m2, latest_mean, latest_variance, ewma,
        recent_means, last_step, signal, phi, band, last_event_id, recent_event_ids, last_policy_version, updated_at)
     select c, t, g, n, mean, m2, lm, lv, ewma, rm::float8[], ls, sig, phi, band, eid,
            (ri::uuid[])[greatest(1, cardinality(ri::uuid[]) - $18 + 1):], pv, now()
       from unnest($1::text[], $2::text[], $3::bigint[], $4::bigint[], $5::float8[], $6::float8[], $7::float8[],
                   $8::float8[], $9::float8[], $10::text[], $11::bigint[], $12::float8[], $13::float8[], $14::text[],
                   $15::uuid[], $16::text[], $17::text[])
         as u(c, t, g, n, mean, m2, lm, lv, ewma, rm, ls, sig, phi, band, eid, ri, pv)
     on conflict (campaign_id, task_id) do update set
       groups = excluded.groups, rollouts = excluded.rollouts, mean = excluded.mean, m2 = excluded.m2,
       latest_mean = excluded.latest_mean, latest_variance = excluded.latest_variance, ewma = excluded.ewma,
       recent_means = excluded.recent_means, last_step = excluded.last_step, signal = excluded.signal,
       phi = excluded.phi, band = excluded.band, last_event_id = excluded.last_event_id,
       recent_event_ids = (task_stats.recent_event_ids || excluded.recent_event_ids)[
         greatest(1, cardinality(task_stats.recent_event_ids) + cardinality(excluded.recent_event_ids) - $18 + 1):],
       last_policy_version = excluded.last_policy_version,
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
      col((r) => pgArray(r.newEventIds)),
      col((r) => r.policyVersion),
      window,
    ],
  );
}

/** Which of these tasks were ever in their campaign's pool (taskKey of each). */
export async function poolMembers(
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

/**
 * Records refused groups by event id; returns those refused for the first time (a group refused
 * again, delivered twice, is tallied as rejected once).
 */
export async function recordRefusals(
  client: pg.PoolClient,
  refused: readonly { campaignId: string; eventId: string; step: number; code: string }[],
): Promise<typeof refused> {
  if (refused.length === 0) return [];
  const { rows } = await client.query<{ campaign_id: string; event_id: string }>(
    `insert into aggregator_rejections (campaign_id, event_id, step, code)
     select * from unnest($1::text[], $2::uuid[], $3::bigint[], $4::text[])
     on conflict (campaign_id, event_id) do nothing
     returning campaign_id, event_id`,
    [
      refused.map((r) => r.campaignId),
      refused.map((r) => r.eventId),
      refused.map((r) => r.step),
      refused.map((r) => r.code),
    ],
  );
  const fresh = new Set(rows.map((r) => `${r.campaign_id}\u0000${r.event_id}`));
  return refused.filter((r) => fresh.has(`${r.campaignId}\u0000${r.eventId}`));
}
