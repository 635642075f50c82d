// Failed attempts at single records (aggregator_record_failures): counted across restarts, so a
// record that keeps failing is dead-lettered after `maxAttempts` however often its process died
// (stages/aggregator/isolate.ts decides; this module only counts).
import type pg from 'pg';

/** A partition of the aggregator's consumer group. */
export interface GroupPartition {
  groupId: string;
  topic: string;
  partition: number;
}

/** An error text PostgreSQL can store (no U+0000, bounded). */
function storableError(error: string): string {
  return error.replaceAll('\u0000', '\\u0000').slice(0, 4000);
}

/** Adds the failures to the records' stored counts (one statement); returns each record's total. */
export async function addRecordFailures(
  pool: pg.Pool,
  at: GroupPartition,
  failed: readonly { offset: string; failures: number; error: string }[],
): Promise<Map<string, number>> {
  const { rows } = await pool.query<{ offset: string; attempts: number }>(
    `insert into aggregator_record_failures (group_id, topic, partition, "offset", attempts, last_error)
     select $1, $2, $3, o, n, e from unnest($4::bigint[], $5::int[], $6::text[]) as t(o, n, e)
     on conflict (group_id, topic, partition, "offset") do update
       set attempts = aggregator_record_failures.attempts + excluded.attempts,
           last_error = excluded.last_error, updated_at = now()
     returning "offset"::text as offset, attempts`,
    [
      at.groupId,
      at.topic,
      at.partition,
      failed.map((f) => f.offset),
      failed.map((f) => f.failures),
      failed.map((f) => storableError(f.error)),
    ],
  );
  return new Map(rows.map((r) => [r.offset, r.attempts]));
}

/** Forgets the records' failures (they were applied or dead-lettered). */
export async function clearRecordFailures(
  pool: pg.Pool,
  at: GroupPartition,
  offsets: readonly string[],
): Promise<void> {
  await pool
    .query(
      'delete from aggregator_record_failures where group_id = $1 and topic = $2 and partition = $3 and "offset" = any($4::bigint[])',
      [at.groupId, at.topic, at.partition, offsets],
    )
    .catch(() => {}); // a leftover row only starts a later count higher
}

/** Forgets the failures of the partition's records up to `offset` (an operator moved past it). */
export async function clearRecordFailuresUpTo(
  db: pg.ClientBase,
  at: GroupPartition,
  offset: string,
): Promise<void> {
  await db.query(
    'delete from aggregator_record_failures where group_id = $1 and topic = $2 and partition = $3 and "offset" <= $4',
    [at.groupId, at.topic, at.partition, offset],
  );
}
