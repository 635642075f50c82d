// The aggregator's offsets (aggregator_offsets: where each partition resumes, written in the
// batch's transaction with the statistics) and the groups it refused (aggregator_rejections).
import type pg from 'pg';
import { lockForTransaction } from '../locks.js';

/**
 * Partition ownership for the length of the transaction (no write yet: see platform/store/events/event-store.ts).
 * Two members briefly owning one partition during a rebalance serialise here.
 */
export async function lockPartition(
  client: pg.PoolClient,
  groupId: string,
  topic: string,
  partition: number,
): Promise<void> {
  await lockForTransaction(client, `rods-aggregator:${groupId}:${topic}:${partition}`);
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

/**
 * The stored next offsets of some partitions, or of all (where a member resumes after an
 * assignment; the authority on where the aggregator resumes, for status).
 */
export async function storedNextOffsets(
  db: pg.Pool,
  groupId: string,
  topic: string,
  partitions?: readonly number[],
): Promise<{ partition: number; nextOffset: number }[]> {
  const { rows } = await db.query<{ partition: number; next_offset: number }>(
    `select partition, next_offset from aggregator_offsets
      where group_id = $1 and topic = $2 and ($3::int[] is null or partition = any($3::int[]))`,
    [groupId, topic, partitions ?? null],
  );
  return rows.map((r) => ({ partition: r.partition, nextOffset: r.next_offset }));
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
