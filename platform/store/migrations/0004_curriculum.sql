-- Up Migration
-- Projections of the curriculum decisions (campaign workflow, synthesis, injection): the
-- training pool of each campaign with its versions, and the candidates synthesized for it.
-- Written in the same transaction as the events they project (store/pool-projection.ts), and
-- rebuildable from the event store.

create table pool_members (
  campaign_id     text not null,
  task_id         text not null,
  origin          text not null check (origin in ('seed', 'generated')),
  category        text not null,
  task            jsonb not null,
  task_hash       text not null,
  parents         text[] not null default '{}',
  root_seed       text not null,
  depth           integer not null default 0,
  added_step      bigint not null,
  added_version   bigint not null,
  active          boolean not null default true,
  removed_step    bigint,
  removed_version bigint,
  removed_rule    text,
  primary key (campaign_id, task_id)
);
create index pool_members_active on pool_members (campaign_id) where active;

create table pool_versions (
  campaign_id text primary key,
  version     bigint not null,
  step        bigint not null,
  updated_at  timestamptz not null default now()
);

-- Candidates by canonical content hash: an exact duplicate of an earlier candidate is rejected.
create table candidates (
  campaign_id    text not null,
  candidate_hash text not null,
  candidate_id   text not null,
  synthesis_id   text not null,
  seed_task_id   text not null,
  status         text not null check (status in ('validated', 'injected', 'rejected')),
  candidate      jsonb not null,
  lineage        jsonb not null,
  created_at     timestamptz not null default now(),
  primary key (campaign_id, candidate_hash),
  unique (campaign_id, candidate_id)
);

-- The campaign's pool state (domain/pool.ts PoolState) after each planned step, and what the
-- step decided: written in the transaction that appends the step's decisions, so a retried
-- planning activity returns the recorded plan instead of deciding again.
create table campaign_plans (
  campaign_id text not null,
  step        bigint not null,
  state       jsonb not null,
  result      jsonb not null,
  created_at  timestamptz not null default now(),
  primary key (campaign_id, step)
);

-- Down Migration
drop table campaign_plans;
drop table candidates;
drop table pool_versions;
drop table pool_members;
