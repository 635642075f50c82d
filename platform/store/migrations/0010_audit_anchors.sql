-- Up Migration
-- Audit anchors (store/audit.ts, `rods audit anchor`): a digest over every stream's head (id,
-- version, hash of that event) and the global position, recorded outside the events table and
-- published to Kafka (rods.audit-anchors.v1). `rods audit verify` checks the store against the
-- latest one: a stream rewritten with a recomputed chain, truncated or deleted no longer matches.
-- Append-only like events; the application's role gets SELECT and INSERT only (store/migrate.ts).
create table audit_anchors (
  anchor_id       bigserial primary key,
  anchored_at     timestamptz not null default now(),
  -- Highest event position in the anchored snapshot.
  global_position bigint not null check (global_position >= 0),
  -- Only the streams whose id starts with this (tests, partial anchors); null: every stream.
  stream_prefix   text,
  stream_count    integer not null check (stream_count >= 0),
  -- 'sha256', or 'hmac-sha256' when RODS_AUDIT_HMAC_KEY was set.
  algorithm       text not null check (algorithm in ('sha256', 'hmac-sha256')),
  digest          bytea not null check (length(digest) = 32),
  -- The heads the digest covers: [[stream id, version, head hash hex], ...] sorted by stream id.
  heads           jsonb not null
);

create trigger audit_anchors_append_only_rows
  before update or delete on audit_anchors
  for each row execute function rods_events_append_only();

create trigger audit_anchors_append_only_truncate
  before truncate on audit_anchors
  for each statement execute function rods_events_append_only();

-- Down Migration
drop table audit_anchors;
