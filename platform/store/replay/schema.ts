// The replay schema of a campaign (analysis/replay/replay.ts): a copy of the projection tables the rebuild
// writes into, its resumable cursor, and the comparisons with the live tables. Every SQL string
// the rebuild runs is here; the pool events themselves go through the live projection
// (platform/store/pool/projection.ts) with the search path set to the replay schema.
import type pg from 'pg';
import type { TaskStats } from '../../../schemas/types.generated.js';
import { inTransaction } from '../db.js';
import { type Cursor, START } from '../events/event-store.js';

/** How a table differs between the live projection and its rebuild. */
export interface TableDiff {
  table: string;
  equal: boolean;
  liveRows: number;
  replayRows: number;
  /** The first rows only in live, and only in the replay (at most 5 each). */
  onlyLive: Record<string, unknown>[];
  onlyReplay: Record<string, unknown>[];
}

export const PROJECTION_TABLES = [
  'campaigns',
  'pool_members',
  'pool_versions',
  'candidates',
  'campaign_configs',
  'seed_rejection_runs',
  'synthesis_funnel_marks',
  'synthesis_funnel_counts',
  'open_syntheses',
  'synthesis_tokens',
] as const;

/** Columns compared per table (creation and update times are not part of the projection's meaning). */
const COMPARED: Record<string, string> = {
  campaigns: 'campaign_id, status, config_version',
  // Every config version and the step it applies from (the thresholds behind the bands).
  campaign_configs: 'campaign_id, version, from_step, config',
  pool_members:
    'campaign_id, task_id, origin, category, task, task_hash, parents, root_seed, depth, added_step, added_version, active, removed_step, removed_version, removed_rule',
  pool_versions: 'campaign_id, version, step',
  seed_rejection_runs: 'campaign_id, seed_task_id, run, reasons, has_validated',
  synthesis_funnel_marks: 'campaign_id, run_id, stage, no_model, hashes',
  synthesis_funnel_counts: 'campaign_id, type, stage, key, hashes, n',
  synthesis_tokens: 'campaign_id, stage, stages, failed, prompt_tokens, completion_tokens',
  // Not the times: replay records when it ran, not when the run was selected.
  open_syntheses:
    'campaign_id, synthesis_id, legacy_id, seed_task_id, step, started_at is not null as started',
  candidates:
    'campaign_id, candidate_hash, candidate_id, synthesis_id, seed_task_id, status, candidate, lineage',
  // Not last_event_id: the aggregator's own bookkeeping (its cache check), which the per-step
  // record (StepStatsRecorded) does not carry.
  task_stats:
    'campaign_id, task_id, groups, rollouts, mean, m2, latest_mean, latest_variance, ewma, last_step, signal, phi, band',
};

export async function prepareReplaySchema(
  c: pg.PoolClient,
  schema: string,
  campaignId: string,
  fresh: boolean,
): Promise<Cursor & { events: number }> {
  // A rebuild from before a projection table or column existed (config versions, seed runs, the
  // funnel, synthesis_tokens.failed): start it again.
  const exists = await c.query<{ ok: boolean }>(
    `select bool_and(to_regclass(t) is not null) as ok from unnest($1::text[]) t
      where not exists (
        select table_name, column_name from information_schema.columns
         where table_schema = 'public' and table_name = any($2::text[])
        except
        select table_name, column_name from information_schema.columns
         where table_schema = $3 and table_name = any($2::text[]))`,
    [PROJECTION_TABLES.map((t) => `${schema}.${t}`), PROJECTION_TABLES, schema],
  );
  if (exists.rows[0]?.ok && !fresh) {
    const cp = await c
      .query<{ transaction_id: string; position: number; events: number; campaign_id: string | null }>(
        `select transaction_id, position, events,
              (select campaign_id from ${schema}.replay_checkpoint_owner) as campaign_id
         from ${schema}.replay_checkpoint`,
      )
      .catch(() => ({
        rows: [] as {
          transaction_id: string;
          position: number;
          events: number;
          campaign_id: string | null;
        }[],
      }));
    // A checkpoint is resumed only by the campaign it belongs to (else the schema is rebuilt).
    if (cp.rows[0] && cp.rows[0].campaign_id === campaignId)
      return {
        transactionId: cp.rows[0].transaction_id,
        position: cp.rows[0].position,
        events: cp.rows[0].events,
      };
  }
  await c.query(`drop schema if exists ${schema} cascade`);
  await c.query(`create schema ${schema}`);
  for (const t of PROJECTION_TABLES) {
    await c.query(`create table ${schema}.${t} (like public.${t} including defaults including constraints)`);
  }
  await c.query(`alter table ${schema}.pool_members add primary key (campaign_id, task_id)`);
  await c.query(`alter table ${schema}.pool_versions add primary key (campaign_id)`);
  await c.query(`alter table ${schema}.candidates add primary key (campaign_id, candidate_hash)`);
  await c.query(`alter table ${schema}.candidates add unique (campaign_id, candidate_id)`);
  await c.query(`alter table ${schema}.campaigns add primary key (campaign_id)`);
  await c.query(`alter table ${schema}.campaign_configs add primary key (campaign_id, version)`);
  await c.query(`alter table ${schema}.seed_rejection_runs add primary key (campaign_id, seed_task_id)`);
  await c.query(`alter table ${schema}.synthesis_funnel_marks add primary key (campaign_id, run_id, stage)`);
  await c.query(`alter table ${schema}.open_syntheses add primary key (campaign_id, synthesis_id)`);
  await c.query(`alter table ${schema}.synthesis_tokens add primary key (campaign_id, stage)`);
  await c.query(
    `alter table ${schema}.synthesis_funnel_counts add primary key (campaign_id, type, stage, key, hashes)`,
  );
  // Every replayed step updates each task's row, as live: half-empty pages keep the updates on
  // their page (migration 0025 does the same for the live table).
  await c.query(
    `create table ${schema}.task_stats (campaign_id text, task_id text, groups bigint, rollouts bigint, mean float8, m2 float8,
       latest_mean float8, latest_variance float8, ewma float8, last_step bigint, signal float8, phi float8, band text,
       last_event_id uuid, primary key (campaign_id, task_id))
       with (fillfactor = 50, autovacuum_vacuum_scale_factor = 0.02, autovacuum_vacuum_cost_delay = 0)`,
  );
  await c.query(
    `create table ${schema}.replay_checkpoint (transaction_id text not null, position bigint not null, events bigint not null)`,
  );
  await c.query(`insert into ${schema}.replay_checkpoint values ('0', 0, 0)`);
  await c.query(`create table ${schema}.replay_checkpoint_owner (campaign_id text not null)`);
  await c.query(`insert into ${schema}.replay_checkpoint_owner values ($1)`, [campaignId]);
  return { ...START, events: 0 };
}

export async function compareReplayTable(
  pool: pg.Pool,
  schema: string,
  table: string,
  campaignId: string,
): Promise<TableDiff> {
  const cols = COMPARED[table]!;
  const q = (a: string, b: string) =>
    pool.query(
      `select ${cols} from ${a}.${table} where campaign_id = $1 except all select ${cols} from ${b}.${table} where campaign_id = $1 limit 5`,
      [campaignId],
    );
  const count = async (s: string) =>
    (
      await pool.query<{ n: number }>(`select count(*)::int as n from ${s}.${table} where campaign_id = $1`, [
        campaignId,
      ])
    ).rows[0]!.n;
  const onlyLive = (await q('public', schema)).rows;
  const onlyReplay = (await q(schema, 'public')).rows;
  return {
    table,
    equal: onlyLive.length === 0 && onlyReplay.length === 0,
    liveRows: await count('public'),
    replayRows: await count(schema),
    onlyLive,
    onlyReplay,
  };
}

/** Runs fn in one transaction whose unqualified table names resolve to the replay schema first. */
export function inReplaySchema<T>(pool: pg.Pool, schema: string, fn: (c: pg.PoolClient) => Promise<T>) {
  return inTransaction(pool, async (c) => {
    await c.query(`set local search_path = ${schema}, public`);
    return fn(c);
  });
}

/** The campaign row and its first config version, as CampaignStarted leaves them. */
export async function replayCampaignStarted(
  c: pg.ClientBase,
  schema: string,
  campaignId: string,
  name: unknown,
  config: unknown,
): Promise<void> {
  await c.query(
    `insert into ${schema}.campaigns (campaign_id, name, config) values ($1, $2, $3) on conflict do nothing`,
    [campaignId, name, config],
  );
  await c.query(
    `insert into ${schema}.campaign_configs (campaign_id, version, from_step, config) values ($1, 1, 0, $2)
     on conflict do nothing`,
    [campaignId, config],
  );
}

/** What replay writes of a task's statistics (from TaskStatsUpdated, or an entry of StepStatsRecorded). */
export type ReplayedTaskStats = TaskStats & {
  taskId: string;
  /** The last group applied (recorded by TaskStatsUpdated only). */
  sourceEventId: string | null;
};

/**
 * Tasks' statistics as an event carries them. The entry with the most groups wins, whatever the
 * order the events come in: one batch's records are per step, and a late group of an earlier step
 * (rewards.lateGroups = fold) is applied after a newer step's groups.
 */
export async function replayTaskStats(
  c: pg.ClientBase,
  schema: string,
  campaignId: string,
  tasks: readonly ReplayedTaskStats[],
): Promise<void> {
  if (tasks.length === 0) return;
  const col = <K extends keyof ReplayedTaskStats>(k: K) => tasks.map((t) => t[k]);
  await c.query(
    `insert into ${schema}.task_stats
     select $1, * from unnest($2::text[], $3::bigint[], $4::bigint[], $5::float8[], $6::float8[], $7::float8[],
                             $8::float8[], $9::float8[], $10::bigint[], $11::float8[], $12::float8[], $13::text[], $14::uuid[])
     on conflict (campaign_id, task_id) do update set groups = excluded.groups, rollouts = excluded.rollouts,
       mean = excluded.mean, m2 = excluded.m2, latest_mean = excluded.latest_mean,
       latest_variance = excluded.latest_variance, ewma = excluded.ewma, last_step = excluded.last_step,
       signal = excluded.signal, phi = excluded.phi, band = excluded.band, last_event_id = excluded.last_event_id
       where excluded.groups >= task_stats.groups`,
    [
      campaignId,
      col('taskId'),
      col('groupCount'),
      col('count'),
      col('mean'),
      col('m2'),
      col('latestGroupMean'),
      col('latestGroupVariance'),
      col('ewma'),
      col('lastStep'),
      col('signal'),
      col('phi'),
      col('band'),
      col('sourceEventId'),
    ],
  );
}

/** Moves the rebuild's cursor (in the transaction that applied the page it read). */
export async function saveReplayCursor(
  c: pg.ClientBase,
  schema: string,
  cursor: Cursor,
  events: number,
): Promise<void> {
  await c.query(`update ${schema}.replay_checkpoint set transaction_id = $1, position = $2, events = $3`, [
    cursor.transactionId,
    cursor.position,
    events,
  ]);
}

/** The rebuilt pool: its version and its active members' ids in order. */
export async function replayedPool(
  pool: pg.Pool,
  schema: string,
  campaignId: string,
): Promise<{ version: number | undefined; members: string[] }> {
  const version = (
    await pool.query<{ version: number }>(
      `select version::int from ${schema}.pool_versions where campaign_id = $1`,
      [campaignId],
    )
  ).rows[0]?.version;
  const members = (
    await pool.query<{ task_id: string }>(
      `select task_id from ${schema}.pool_members where campaign_id = $1 and active order by task_id`,
      [campaignId],
    )
  ).rows.map((r) => r.task_id);
  return { version, members };
}
