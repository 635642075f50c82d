-- Up Migration
-- The event store (store/event-store.ts): one append-only table of events, one row per stream
-- holding its head (version and last hash), and the checkpoints of the projections.

-- Head of every stream. Appends to a stream are serialised (advisory lock on the stream id, then
-- this row is read and updated), which keeps its versions and hash chain linear;
-- last_transaction_id keeps per-stream order consistent with the order the readers deliver in
-- (transaction id, position) — see store/event-store.ts.
create table streams (
  stream_id           text primary key check (length(stream_id) between 1 and 512),
  version             bigint not null default 0 check (version >= 0),
  last_hash           bytea not null default '\x0000000000000000000000000000000000000000000000000000000000000000'::bytea,
  last_transaction_id xid8 not null default '0'::xid8,
  created_at          timestamptz not null default now(),
  updated_at          timestamptz not null default now()
);

create table events (
  position       bigserial primary key,
  stream_id      text not null,
  stream_version bigint not null check (stream_version >= 1),
  event_id       uuid not null unique,
  type           text not null check (length(type) between 1 and 256),
  -- CRC-64-AVRO fingerprint of the writer schema, 16 lower-case hex digits (given by the caller).
  fingerprint    text not null check (fingerprint ~ '^[0-9a-f]{16}$'),
  payload        jsonb not null,
  -- correlation id, causation id, producer (and any other caller keys)
  metadata       jsonb not null default '{}'::jsonb,
  recorded_at    timestamptz not null default now(),
  -- Top-level transaction that wrote the row: readers only pass rows whose transaction is older
  -- than every transaction still running, so an event that commits late is never skipped.
  transaction_id xid8 not null default pg_current_xact_id(),
  -- Hash chain per stream: hash = sha256(prev_hash || canonical bytes); prev_hash of version 1 is
  -- 32 zero bytes.
  prev_hash      bytea not null check (length(prev_hash) = 32),
  hash           bytea not null check (length(hash) = 32),
  unique (stream_id, stream_version)
);

-- Keyset reads of the whole log in commit-safe order.
create index events_transaction_position on events (transaction_id, position);

-- Append-only: UPDATE, DELETE and TRUNCATE of events are refused unless the session (or the
-- transaction, with SET LOCAL) sets rods.allow_event_mutation = 'on'. This guards against
-- mistakes, not against a privileged attacker (the table owner can set the flag or disable the
-- trigger): tampering is what the hash chain and `rods audit verify` detect.
create function rods_events_append_only() returns trigger
language plpgsql as $$
begin
  if coalesce(current_setting('rods.allow_event_mutation', true), '') <> 'on' then
    raise exception 'events are append-only: % refused', tg_op
      using errcode = 'insufficient_privilege',
            hint = 'set rods.allow_event_mutation = ''on'' in the session to bypass (maintenance and tamper tests only)';
  end if;
  if tg_op = 'DELETE' then
    return old;
  elsif tg_op = 'UPDATE' then
    return new;
  end if;
  return null;
end;
$$;

create trigger events_append_only_rows
  before update or delete on events
  for each row execute function rods_events_append_only();

create trigger events_append_only_truncate
  before truncate on events
  for each statement execute function rods_events_append_only();

-- Position of each projection in the log: the (transaction id, position) cursor of the last
-- event it applied, committed in the same transaction as the projection's own writes.
create table projection_checkpoints (
  name           text primary key,
  position       bigint not null default 0,
  transaction_id xid8 not null default '0'::xid8,
  updated_at     timestamptz not null default now()
);

-- Down Migration
drop table projection_checkpoints;
drop table events;
drop function rods_events_append_only();
drop table streams;
