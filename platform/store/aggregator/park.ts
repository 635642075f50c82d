// Records of a campaign set aside on their partition (aggregator_parked). When a batch fails and
// the part of it that fails is one campaign's, that campaign's records are parked in the
// transaction that commits the others' with the partition's next offset: the partition goes on
// at the rate of good records, and one campaign's failures never hold another campaign's steps.
// While a campaign has records parked on a partition, its next records there are parked behind
// them (its own order is what its statistics are folded in). A drain (AggregatorService) applies
// a campaign's parked records in offset order, searching them for the failing ones, which are
// dead-lettered; each drained record leaves the table in the transaction that applies it.
// Exactly-once holds as for a batch: a record is parked, applied or dead-lettered together with
// the row that says so.
import type pg from 'pg';

/** The campaigns with records parked on this partition (read under the partition's lock). */
export async function parkedCampaigns(
  tx: pg.ClientBase,
  groupId: string,
  topic: string,
  partition: number,
): Promise<Set<string>> {
  const { rows } = await tx.query<{ campaign_id: string }>(
    `select distinct campaign_id from aggregator_parked where group_id = $1 and topic = $2 and partition = $3`,
    [groupId, topic, partition],
  );
  return new Set(rows.map((r) => r.campaign_id));
}

/** A consumed record's offset and bytes. */
export interface StoredRecord {
  offset: string;
  key: Buffer | null;
  value: Buffer | null;
}

/** A consumed record held back, with its campaign and why. */
export interface ParkedRecord extends StoredRecord {
  campaignId: string;
  reason: string;
}

export async function parkRecords(
  tx: pg.ClientBase,
  groupId: string,
  topic: string,
  partition: number,
  records: readonly ParkedRecord[],
): Promise<void> {
  if (records.length === 0) return;
  await tx.query(
    `insert into aggregator_parked (group_id, topic, partition, "offset", campaign_id, key, value, reason)
     select $1, $2, $3, o, c, k, v, r
       from unnest($4::bigint[], $5::text[], $6::bytea[], $7::bytea[], $8::text[]) as t(o, c, k, v, r)
     on conflict do nothing`,
    [
      groupId,
      topic,
      partition,
      records.map((r) => r.offset),
      records.map((r) => r.campaignId),
      records.map((r) => r.key),
      records.map((r) => r.value),
      records.map((r) => r.reason.slice(0, 4000)),
    ],
  );
}

/** Which of these offsets are still parked (a drain applies only those: the others are done). */
export async function stillParked(
  tx: pg.ClientBase,
  groupId: string,
  topic: string,
  partition: number,
  offsets: readonly string[],
): Promise<Set<string>> {
  const { rows } = await tx.query<{ offset: string }>(
    `select "offset"::text as offset from aggregator_parked
      where group_id = $1 and topic = $2 and partition = $3 and "offset" = any($4::bigint[])`,
    [groupId, topic, partition, offsets],
  );
  return new Set(rows.map((r) => r.offset));
}

export async function unpark(
  tx: pg.ClientBase,
  groupId: string,
  topic: string,
  partition: number,
  offsets: readonly string[],
): Promise<void> {
  if (offsets.length === 0) return;
  await tx.query(
    `delete from aggregator_parked
      where group_id = $1 and topic = $2 and partition = $3 and "offset" = any($4::bigint[])`,
    [groupId, topic, partition, offsets],
  );
}

/** Partitions (of those given) and campaigns with parked records, the longest parked first. */
export async function parkedQueues(
  db: pg.Pool,
  groupId: string,
  topic: string,
  partitions: readonly number[],
): Promise<{ partition: number; campaignId: string }[]> {
  if (partitions.length === 0) return [];
  const { rows } = await db.query<{ partition: number; campaign_id: string }>(
    `select partition, campaign_id from aggregator_parked
      where group_id = $1 and topic = $2 and partition = any($3::int[])
      group by partition, campaign_id order by min(parked_at)`,
    [groupId, topic, partitions],
  );
  return rows.map((r) => ({ partition: r.partition, campaignId: r.campaign_id }));
}

/** A campaign's first parked records on a partition, in offset order. */
export async function loadParked(
  db: pg.Pool,
  groupId: string,
  topic: string,
  partition: number,
  campaignId: string,
  limit: number,
): Promise<StoredRecord[]> {
  const { rows } = await db.query<{ offset: string; key: Buffer | null; value: Buffer | null }>(
    `select "offset"::text as offset, key, value from aggregator_parked
      where group_id = $1 and topic = $2 and partition = $3 and campaign_id = $4
      order by "offset" limit $5`,
    [groupId, topic, partition, campaignId, limit],
  );
  return rows;
}

export interface ParkedView {
  records: number;
  partitions: number;
  oldestParkedAt: string | null;
  /** Why the first of them was set aside. */
  reason: string | null;
}

/** What a campaign has parked, across partitions and groups (the status report). */
export async function parkedOf(db: pg.Pool, campaignId: string): Promise<ParkedView> {
  const { rows } = await db.query<{ n: number; p: number; oldest: Date | null; reason: string | null }>(
    `select count(*)::int as n, count(distinct (topic, partition))::int as p, min(parked_at) as oldest,
            (array_agg(reason order by parked_at, "offset"))[1] as reason
       from aggregator_parked where campaign_id = $1`,
    [campaignId],
  );
  const r = rows[0]!;
  return {
    records: r.n,
    partitions: r.p,
    oldestParkedAt: r.oldest ? r.oldest.toISOString() : null,
    reason: r.reason,
  };
}
