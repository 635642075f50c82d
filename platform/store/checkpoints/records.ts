// The recorded checkpoints as the checkpoint route reads them (migration 0029): one row per
// CheckpointSaved, written in the transaction that appends the event, and the steps each one's
// run trained again. A request reads its own checkpoint's row and its chain's (the checkpoints it
// resumes from, and the steps their runs trained again within the chain), never the campaign's
// whole checkpoints stream, which grows with every report. `rods audit verify` still recomputes
// every root from the stream itself (analysis/manifest/).
import type pg from 'pg';
import { streams } from '../../../domain/ids.js';
import type { CheckpointReportKey, StepTask } from '../../../domain/manifest.js';
import { append, type Queryable, typedEvent } from '../events/event-store.js';
import { lockForSession, unlockSession } from '../locks.js';
import { clearCheckpointWait } from './waits.js';

/** A recorded checkpoint's row: its report's scalars, its receipt and its place in the record order. */
export interface CheckpointRow {
  checkpointId: string;
  seq: number;
  runId: string;
  trainerStep: number;
  resumedFrom: string | null;
  digest: string | null;
  /** Null for a row copied from an event recorded before migration 0029 (filled in on first use). */
  reportHash: string | null;
  manifestRoot: string;
  manifestTasks: number;
  manifestGroups: number;
  recordedAt: Date;
}

const COLUMNS = `checkpoint_id as "checkpointId", seq::float8 as seq, run_id as "runId",
  trainer_step::float8 as "trainerStep", resumed_from as "resumedFrom", digest, report_hash as "reportHash",
  manifest_root as "manifestRoot", manifest_tasks as "manifestTasks", manifest_groups::float8 as "manifestGroups",
  recorded_at as "recordedAt"`;

/** The recorded checkpoint of that id, or null. */
export async function findCheckpoint(
  db: Queryable,
  campaignId: string,
  checkpointId: string,
): Promise<CheckpointRow | null> {
  const { rows } = await db.query<CheckpointRow>(
    `select ${COLUMNS} from checkpoint_records where campaign_id = $1 and checkpoint_id = $2`,
    [campaignId, checkpointId],
  );
  return rows[0] ?? null;
}

/** The steps a recorded checkpoint's run trained again, as its report gave them (steps ascending). */
export async function retrainedOf(
  db: Queryable,
  campaignId: string,
  checkpointId: string,
): Promise<{ step: number; tasks: StepTask[] }[]> {
  const { rows } = await db.query<{ step: number; task_ids: string[]; rollouts: number[] }>(
    `select step::float8 as step, task_ids, rollouts from checkpoint_retrained
      where campaign_id = $1 and checkpoint_id = $2 order by step`,
    [campaignId, checkpointId],
  );
  return rows.map((r) => ({ step: r.step, tasks: stepTasks(r.task_ids, r.rollouts) }));
}

const stepTasks = (ids: string[], rollouts: number[]): StepTask[] =>
  ids.map((taskId, i) => ({ taskId, groups: 1, rollouts: rollouts[i] ?? 0 }));

/** Fills in the report hash of a row copied from an event recorded before the rows existed. */
export async function setReportHash(
  db: Queryable,
  campaignId: string,
  checkpointId: string,
  hash: string,
): Promise<void> {
  await db.query(
    `update checkpoint_records set report_hash = $3
      where campaign_id = $1 and checkpoint_id = $2 and report_hash is null`,
    [campaignId, checkpointId, hash],
  );
}

/** The longest chain of resumes the route follows (a chain is one link per resumed run). */
export const MAX_CHAIN = 10_000;

/** The recorded checkpoint `from` and the ones it resumes from, newest first (at most MAX_CHAIN). */
export async function chainOf(db: Queryable, campaignId: string, from: string): Promise<CheckpointRow[]> {
  const { rows } = await db.query<CheckpointRow & { depth: number }>(
    `with recursive chain (id, parent, depth) as (
       select checkpoint_id, resumed_from, 0 from checkpoint_records where campaign_id = $1 and checkpoint_id = $2
       union all
       select c.checkpoint_id, c.resumed_from, chain.depth + 1
         from checkpoint_records c join chain on c.campaign_id = $1 and c.checkpoint_id = chain.parent
        where chain.depth < $3)
     select ${COLUMNS}, chain.depth from chain join checkpoint_records r on r.campaign_id = $1 and r.checkpoint_id = chain.id
      order by chain.depth`,
    [campaignId, from, MAX_CHAIN],
  );
  return rows;
}

/**
 * What run `runId` trained again at steps (from, to], from its checkpoints of a step at most `to`
 * recorded so far: each step as the first such checkpoint (in record order) reported it.
 */
export async function retrainedInSegment(
  db: Queryable,
  campaignId: string,
  runId: string,
  from: number,
  to: number,
): Promise<Map<number, StepTask[]>> {
  const { rows } = await db.query<{ step: number; task_ids: string[]; rollouts: number[] }>(
    `select distinct on (r.step) r.step::float8 as step, r.task_ids, r.rollouts
       from checkpoint_records c
       join checkpoint_retrained r on r.campaign_id = c.campaign_id and r.checkpoint_id = c.checkpoint_id
      where c.campaign_id = $1 and c.run_id = $2 and c.trainer_step <= $4 and r.step > $3 and r.step <= $4
      order by r.step, c.seq`,
    [campaignId, runId, from, to],
  );
  return new Map(rows.map((r) => [r.step, stepTasks(r.task_ids, r.rollouts)]));
}

/** What a CheckpointSaved holds beyond the report: its event's payload as the route builds it. */
export type CheckpointSavedPayload = Parameters<typeof typedEvent<'CheckpointSaved'>>[1];

/**
 * Appends CheckpointSaved and its rows, and ends the checkpoint's wait, in one transaction on the
 * locked connection (the event's id derives from campaign and checkpoint: a second report of the
 * id appends nothing). Returns whether it was appended.
 */
export async function recordCheckpoint(
  locked: pg.PoolClient,
  payload: CheckpointSavedPayload,
  report: CheckpointReportKey,
  reportHash: string,
): Promise<boolean> {
  await locked.query('begin');
  try {
    const appended = await recordIn(locked, payload, report, reportHash);
    await clearCheckpointWait(locked, payload.campaignId, payload.checkpointId);
    await locked.query('commit');
    return appended;
  } catch (e) {
    await locked.query('rollback').catch(() => {});
    throw e;
  }
}

async function recordIn(
  client: pg.PoolClient,
  payload: CheckpointSavedPayload,
  report: CheckpointReportKey,
  reportHash: string,
): Promise<boolean> {
  const r = await append(client, streams.checkpoints(payload.campaignId), 'any', [
    typedEvent('CheckpointSaved', payload, { producer: 'rods-gateway' }),
  ]);
  if (!r.appended) return false;
  await client.query(
    `insert into checkpoint_records (campaign_id, checkpoint_id, seq, run_id, trainer_step, resumed_from, digest,
                                     report_hash, manifest_root, manifest_tasks, manifest_groups, recorded_at)
     values ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, to_timestamp($12 / 1000.0))`,
    [
      payload.campaignId,
      payload.checkpointId,
      r.nextExpectedVersion,
      payload.runId,
      payload.trainerStep,
      payload.resumedFrom ?? null,
      payload.digest ?? null,
      reportHash,
      payload.manifestRoot,
      payload.manifestTasks,
      payload.manifestGroups,
      payload.occurredAt,
    ],
  );
  if (report.retrainedSteps.length > 0)
    await client.query(
      `insert into checkpoint_retrained (campaign_id, checkpoint_id, step, task_ids, rollouts)
       select $1, $2, s.step, array(select jsonb_array_elements_text(s.task_ids)),
              array(select x::integer from jsonb_array_elements_text(s.rollouts) x)
         from jsonb_to_recordset($3::jsonb) as s(step bigint, task_ids jsonb, rollouts jsonb)`,
      [
        payload.campaignId,
        payload.checkpointId,
        JSON.stringify(
          report.retrainedSteps.map((s) => ({
            step: s.step,
            task_ids: s.tasks.map((t) => t.taskId),
            rollouts: s.tasks.map((t) => t.rollouts),
          })),
        ),
      ],
    );
  return true;
}

/**
 * Runs `fn` holding the campaign's checkpoint lock (a session advisory lock on a connection of
 * its own, so that the computation in between holds no transaction open): one checkpoint of a
 * campaign is computed and recorded at a time, across gateways, so each manifest is computed with
 * exactly the checkpoints recorded before it.
 */
export async function withCheckpointLock<T>(
  db: pg.Pool,
  campaignId: string,
  fn: (locked: pg.PoolClient) => Promise<T>,
): Promise<T> {
  const client = await db.connect();
  let broken = false;
  try {
    await lockForSession(client, `checkpoints:${campaignId}`);
    return await fn(client);
  } catch (e) {
    broken = client.getTransactionStatus?.() === 'E';
    throw e;
  } finally {
    await unlockSession(client).catch(() => {
      broken = true;
    });
    client.release(broken);
  }
}
