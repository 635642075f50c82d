// A record that kills the process reading it (no try/catch can stop a heap exhaustion or a
// native crash) must not kill every process that takes its partition after. Before it folds a
// batch, an aggregator writes the batch's offsets and its own identity to aggregator_suspects,
// in a statement of its own that commits before any record is decoded. The process that takes the
// partition next finds the range still above the stored next offset and written by someone else:
// someone died there. It then folds that range in marked parts (stages/aggregator/service.ts: 64 records,
// then a part a process died in one record at a time), marking each record alone first.
// A process killed from outside (kill -9, the OOM killer, a lost machine) leaves the same trace,
// so a record found marked alone after one death is tried alone once more, the death counted in
// its new mark; found so a second time, it killed two processes on its own and is dead-lettered
// (`reader-crashed`) without being folded again. A record that kills every reader thus kills
// three processes (its batch's, then two alone), never more, and an outside kill never costs a
// good record.
import type pg from 'pg';

export interface CrashedRange {
  from: number;
  to: number;
  /** Written by a process that did not commit past it, when. */
  startedAt: string;
  owner: string;
  /** The range was one record marked alone, and processes had died on it alone this many times before. */
  alone: boolean;
  crashes: number;
}

/** Deaths with a record marked alone after which it is dead-lettered (reader-crashed). */
export const ALONE_CRASHES_TO_DEAD_LETTER = 2;

export interface RangeMark {
  /**
   * A part of a range a process died in, marked by the process that applies it piece by piece:
   * its mark replaces the dead process's (alone marks are always such parts).
   */
  part?: boolean;
  /** One record, marked on its own (applied one record at a time after a crash). */
  alone?: boolean;
  /** Processes already known to have died on this record alone. */
  crashes?: number;
}

/**
 * Marks [from, to] as the range this process folds next; returns the range another process left
 * uncommitted there (overlapping this one, above the stored next offset), if any.
 */
export async function beginRange(
  db: pg.Pool,
  groupId: string,
  topic: string,
  partition: number,
  from: number,
  to: number,
  owner: string,
  how: RangeMark = {},
): Promise<CrashedRange | null> {
  const { rows } = await db.query<{
    from_offset: string;
    to_offset: string;
    owner: string;
    started_at: Date;
    next_offset: string;
    alone: boolean;
    crashes: number;
  }>(
    `select s.from_offset, s.to_offset, s.owner, s.started_at, s.alone, s.crashes,
            coalesce((select o.next_offset from aggregator_offsets o
                       where o.group_id = $1 and o.topic = $2 and o.partition = $3), 0) as next_offset
       from aggregator_suspects s
      where s.group_id = $1 and s.topic = $2 and s.partition = $3`,
    [groupId, topic, partition],
  );
  const p = rows[0];
  let crashed: CrashedRange | null = null;
  if (p && p.owner !== owner) {
    const start = Math.max(Number(p.from_offset), Number(p.next_offset));
    const end = Number(p.to_offset);
    if (start <= end)
      crashed = {
        from: start,
        to: end,
        startedAt: p.started_at.toISOString(),
        owner: p.owner,
        alone: p.alone,
        crashes: p.crashes,
      };
  }
  // The mark of a process that died stays until this process marks the records of its range
  // one by one (a batch abandoned meanwhile, by a seek or a rebalance, must not erase it); a
  // range below it (records already counted, skipped) leaves it for the batch that reaches it.
  if (crashed && !how.part && !how.alone) return crashed.from > to || crashed.to < from ? null : crashed;
  // A range wholly below the stored offset folds nothing (its records are skipped): it leaves
  // the mark as it is. Marking it would erase a dead process's mark before this process took
  // up that range (the part of a batch before a crashed range, or a batch delivered again when
  // the seek to the stored offset came after the first fetch).
  if (p && to < Number(p.next_offset)) return null;
  await db.query(
    `insert into aggregator_suspects
       (group_id, topic, partition, from_offset, to_offset, owner, started_at, alone, crashes)
     values ($1, $2, $3, $4, $5, $6, now(), $7, $8)
     on conflict (group_id, topic, partition) do update
       set from_offset = excluded.from_offset, to_offset = excluded.to_offset, owner = excluded.owner,
           started_at = excluded.started_at, alone = excluded.alone, crashes = excluded.crashes`,
    [groupId, topic, partition, from, to, owner, how.alone ?? false, how.crashes ?? 0],
  );
  return null;
}

export interface StuckHead {
  topic: string;
  partition: number;
  /** The stored next offset: the record at the head of the partition. */
  offset: number;
  /** Why it holds: a range a process died in, or failed attempts at the record. */
  reason: string;
  since: string;
}

/**
 * Partitions whose head has not moved: an uncommitted range older than `olderThanS` seconds (a
 * process died there, or is wedged), or a record that failed and is being retried.
 */
export async function stuckHeads(db: pg.Pool, groupId: string, olderThanS = 60): Promise<StuckHead[]> {
  const { rows } = await db.query<{
    topic: string;
    partition: number;
    next_offset: string;
    from_offset: string | null;
    to_offset: string | null;
    started_at: Date | null;
    attempts: number | null;
    last_error: string | null;
    failed_at: Date | null;
  }>(
    `select o.topic, o.partition, o.next_offset, s.from_offset, s.to_offset, s.started_at,
            f.attempts, f.last_error, f.updated_at as failed_at
       from aggregator_offsets o
       left join aggregator_suspects s on s.group_id = o.group_id and s.topic = o.topic and s.partition = o.partition
            and s.to_offset >= o.next_offset and s.started_at < now() - make_interval(secs => $2)
       left join aggregator_record_failures f on f.group_id = o.group_id and f.topic = o.topic
            and f.partition = o.partition and f."offset" = o.next_offset
      where o.group_id = $1 and (s.group_id is not null or f.group_id is not null)
      order by o.topic, o.partition`,
    [groupId, olderThanS],
  );
  return rows.map((r) => ({
    topic: r.topic,
    partition: r.partition,
    offset: Number(r.next_offset),
    reason:
      r.attempts !== null
        ? `the record at offset ${r.next_offset} failed ${r.attempts} time(s): ${r.last_error}`
        : `offsets ${r.from_offset}-${r.to_offset} were taken up at ${r.started_at!.toISOString()} and never committed (a process died or hangs there)`,
    since: (r.failed_at ?? r.started_at)!.toISOString(),
  }));
}
