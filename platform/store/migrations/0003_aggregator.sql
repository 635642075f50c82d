-- Up Migration
-- Campaign registry and the stream aggregator's state (aggregator/). The aggregator writes
-- task_stats (with each task's dedupe window), step progress and its consumed offsets in the same transaction
-- as the events it appends to the event store, so a reward group counts exactly once.

-- Campaigns known to the pipeline (a projection of CampaignStarted / CampaignReconfigured).
create table campaigns (
  campaign_id text primary key,
  name        text not null,
  config      jsonb not null,
  status      text not null default 'running',
  created_at  timestamptz not null default now(),
  updated_at  timestamptz not null default now()
);

-- Per-task statistics (domain/task-stats.ts TaskState, flattened).
create table task_stats (
  campaign_id     text not null,
  task_id         text not null,
  groups          bigint not null,
  rollouts        bigint not null,
  mean            double precision not null,
  m2              double precision not null,
  latest_mean     double precision not null,
  latest_variance double precision not null,
  ewma            double precision not null,
  recent_means    double precision[] not null,
  last_step       bigint not null,
  signal          double precision not null,
  phi             double precision not null,
  band            text not null check (band in ('hard', 'boundary', 'mastered')),
  last_event_id   uuid not null,
  -- Event ids of the task's most recent groups, newest last: the dedupe window (aggregator/README.md).
  recent_event_ids uuid[] not null default '{}',
  -- Policy version (checkpoint) of the latest group: lineage records what triggered a synthesis.
  last_policy_version text,
  updated_at      timestamptz not null default now(),
  primary key (campaign_id, task_id)
);
create index task_stats_band on task_stats (campaign_id, band);

-- Next offset to consume per partition and consumer group: the authority on where a partition
-- resumes (Kafka's committed offsets are only a hint).
create table aggregator_offsets (
  group_id    text not null,
  topic       text not null,
  partition   integer not null,
  next_offset bigint not null,
  updated_at  timestamptz not null default now(),
  primary key (group_id, topic, partition)
);

-- Groups accounted per (campaign, step, partition): no row is shared by two partitions, so
-- aggregator instances never wait on each other here.
create table step_progress (
  campaign_id        text not null,
  step               bigint not null,
  topic              text not null,
  partition          integer not null,
  groups_applied     bigint not null default 0,
  groups_rejected    bigint not null default 0,
  hard_tasks         bigint not null default 0,
  hard_var_sum       double precision not null default 0,
  boundary_tasks     bigint not null default 0,
  boundary_var_sum   double precision not null default 0,
  mastered_tasks     bigint not null default 0,
  mastered_var_sum   double precision not null default 0,
  primary key (campaign_id, step, topic, partition)
);

-- One row per (campaign, step): the declared group count (StepClosed) and when it closed.
create table steps (
  campaign_id     text not null,
  step            bigint not null,
  declared_groups bigint,
  closed_at       timestamptz,
  summary         jsonb,
  primary key (campaign_id, step)
);
create index steps_open on steps (campaign_id, step) where closed_at is null;

-- Down Migration
drop table steps;
drop table step_progress;
drop table aggregator_offsets;
drop table task_stats;
drop table campaigns;
