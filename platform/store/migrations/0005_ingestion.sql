-- Up Migration
-- The gateway's rollout ingestion (gateway/, workflows/ingestion.ts). A batch body is kept here
-- as a claim check (the ingestion workflow gets only its id, so no Temporal payload carries the
-- rewards), and each accepted batch has one row: the idempotency key (campaign, step, batch id),
-- its group count (summed into the step's StepClosed) and whether it closes the step.

create table claim_checks (
  claim_id   text primary key,
  kind       text not null,
  body       jsonb not null,
  created_at timestamptz not null default now()
);

create table ingestion_batches (
  campaign_id  text not null,
  step         bigint not null,
  batch_id     text not null,
  groups       integer not null check (groups >= 0),
  -- true for the batch that closes the step (its workflow publishes StepClosed)
  closes       boolean not null default false,
  status       text not null check (status in ('accepted', 'published')),
  claim_id     text not null references claim_checks (claim_id),
  workflow_id  text not null,
  -- StepClosed's declared group count, once published by the closing batch
  step_groups  integer,
  created_at   timestamptz not null default now(),
  published_at timestamptz,
  primary key (campaign_id, step, batch_id)
);
-- At most one closing batch per step.
create unique index ingestion_batches_one_close on ingestion_batches (campaign_id, step) where closes;

-- Down Migration
drop table ingestion_batches;
drop table claim_checks;
