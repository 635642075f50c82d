-- Up Migration
-- Small key/value settings of the installation (schema owner notes, cluster ids, feature flags).
create table rods_settings (
  key        text primary key,
  value      jsonb not null,
  updated_at timestamptz not null default now()
);

-- Down Migration
drop table rods_settings;
