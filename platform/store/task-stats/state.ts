// Each task's statistics with its dedupe window (task_stats), as the aggregator reads and writes
// them inside a batch's one transaction (with the partition's offset: platform/store/aggregator/offsets.ts).
// State and consumed offset commit together or not at all.
import type pg from 'pg';
import type { TaskState } from '../../../domain/task-stats.js';
import type { TaskStatsRow } from './view.js';

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

/** What the task read asks of a cache of committed task states (stages/aggregator/task-cache.ts). */
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

/** The key of a task's statistics and dedupe window (campaign and task id). */
export const taskKey = (campaignId: string, taskId: string) => `${campaignId}\u0000${taskId}`;

/**
 * The current statistics of the tasks named (tasks never seen are absent). With a cache, a task
 * whose stored group count and last event id match the cached ones comes from the cache
 * (stages/aggregator/task-cache.ts); only the others are read in full.
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
