-- Up Migration
-- Failed attempts at one reward record (aggregator/isolate.ts): a record whose transaction keeps
-- failing at the same offset is dead-lettered after a few attempts instead of stalling its
-- partition. The count lives here so that it survives a restart or a move of the partition.
create table aggregator_record_failures (
  group_id   text not null,
  topic      text not null,
  partition  integer not null,
  "offset"   bigint not null,
  attempts   integer not null,
  last_error text not null,
  updated_at timestamptz not null default now(),
  primary key (group_id, topic, partition, "offset")
);

-- Down Migration
drop table aggregator_record_failures;
