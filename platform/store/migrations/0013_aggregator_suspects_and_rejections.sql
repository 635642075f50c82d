-- Up Migration
-- The range of a partition an aggregator process is about to fold, written (and committed)
-- before it decodes anything: a record that kills the process leaves its range here with an
-- offset the stored next offset never passed, so the process that takes the partition next
-- knows and folds that range one record at a time, each marked alone. A kill -9 from outside
-- looks the same, so one death with a record marked alone is not enough: `crashes` counts the
-- processes that died with this record marked alone before, and the second such death
-- dead-letters it (reader-crashed) instead of reading it again.
create table aggregator_suspects (
  group_id text not null,
  topic text not null,
  partition int not null,
  from_offset bigint not null,
  to_offset bigint not null,
  -- The process that wrote it (a retry by the same process is not a crash).
  owner text not null,
  -- One record marked on its own (after a crash), and how many processes died on it so.
  alone boolean not null default false,
  crashes int not null default 0,
  started_at timestamptz not null default now(),
  primary key (group_id, topic, partition)
);

-- Reward groups the aggregator refused (reward limits, stale step), by event id: a refused
-- group delivered again (a re-sent batch) is recognised and not counted as refused twice,
-- which could close its step before the groups still owed to it arrived.
create table aggregator_rejections (
  campaign_id text not null,
  event_id uuid not null,
  step bigint not null,
  code text not null,
  created_at timestamptz not null default now(),
  primary key (campaign_id, event_id)
);

-- Records of a campaign set aside on their partition because its records failed to fold
-- (aggregator/park.ts): written in the transaction that moves the partition's next offset past
-- them, so the partition goes on for every other campaign, and deleted in the transaction that
-- applies (or dead-letters) them, in offset order. While a campaign has records here on a
-- partition, its next records there join them, so its own order is kept.
create table aggregator_parked (
  group_id text not null,
  topic text not null,
  partition int not null,
  "offset" bigint not null,
  campaign_id text not null,
  key bytea,
  value bytea,
  -- Why the campaign's records were set aside (the error of the part that failed).
  reason text not null,
  parked_at timestamptz not null default now(),
  primary key (group_id, topic, partition, "offset")
);
create index aggregator_parked_campaign on aggregator_parked (campaign_id);

-- Down Migration
drop table aggregator_parked;
drop table aggregator_rejections;
drop table aggregator_suspects;
