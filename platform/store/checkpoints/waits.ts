// Checkpoints the gateway answered 503 checkpoint-ahead: a step up to theirs is not closed yet.
// One row per campaign and checkpoint id, updated by every retry and removed when the checkpoint
// is recorded, so that `rods campaign status` names each wait and what it waits for. A campaign
// keeps at most MAX_WAITS rows (a token cannot fill the table with ids): past it, the oldest go.
import type { Queryable } from '../events/event-store.js';

export const MAX_WAITS = 100;

export interface CheckpointWait {
  checkpointId: string;
  trainerStep: number;
  /** The first step up to the checkpoint's that is not closed (null: the checkpoint's step was never reported). */
  waitsForStep: number | null;
  reason: string;
  firstAskedAt: string;
  lastAskedAt: string;
  attempts: number;
}

/** Notes (or refreshes) that the checkpoint waits, and why. */
export async function noteCheckpointWait(
  db: Queryable,
  campaignId: string,
  w: { checkpointId: string; trainerStep: number; waitsForStep: number | null; reason: string },
): Promise<void> {
  await db.query(
    `with upsert as (
       insert into checkpoint_waits (campaign_id, checkpoint_id, trainer_step, waits_for_step, reason)
       values ($1, $2, $3, $4, $5)
       on conflict (campaign_id, checkpoint_id) do update
         set trainer_step = excluded.trainer_step, waits_for_step = excluded.waits_for_step,
             reason = excluded.reason, last_asked_at = now(), attempts = checkpoint_waits.attempts + 1)
     delete from checkpoint_waits
      where campaign_id = $1 and checkpoint_id in (
        select checkpoint_id from checkpoint_waits where campaign_id = $1
         order by last_asked_at desc offset $6)`,
    [campaignId, w.checkpointId, w.trainerStep, w.waitsForStep, w.reason, MAX_WAITS - 1],
  );
}

/** The checkpoint no longer waits (it was recorded). */
export async function clearCheckpointWait(
  db: Queryable,
  campaignId: string,
  checkpointId: string,
): Promise<void> {
  await db.query('delete from checkpoint_waits where campaign_id = $1 and checkpoint_id = $2', [
    campaignId,
    checkpointId,
  ]);
}

/** Whether the checkpoint is waiting (answered 503 and not recorded since). */
export async function isWaiting(db: Queryable, campaignId: string, checkpointId: string): Promise<boolean> {
  const { rows } = await db.query(
    'select 1 from checkpoint_waits where campaign_id = $1 and checkpoint_id = $2',
    [campaignId, checkpointId],
  );
  return rows.length > 0;
}

/** The campaign's waiting checkpoints, oldest step first (at most `limit`). */
export async function checkpointWaits(
  db: Queryable,
  campaignId: string,
  limit = 20,
): Promise<CheckpointWait[]> {
  const { rows } = await db.query<CheckpointWait>(
    `select checkpoint_id as "checkpointId", trainer_step::float8 as "trainerStep",
            waits_for_step::float8 as "waitsForStep", reason,
            to_char(first_asked_at at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"') as "firstAskedAt",
            to_char(last_asked_at at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"') as "lastAskedAt",
            attempts::float8 as attempts
       from checkpoint_waits where campaign_id = $1
      order by trainer_step, checkpoint_id limit $2`,
    [campaignId, limit],
  );
  return rows;
}
