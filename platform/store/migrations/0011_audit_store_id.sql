-- Up Migration
-- The id of this event store, in every audit anchor and its Kafka copy (AuditAnchored.storeId):
-- `rods audit verify --kafka` only compares an anchor with copies of the same store, so stores
-- sharing one topic (a private stack next to the shared one) are told apart.
insert into rods_settings (key, value)
values ('audit.store_id', to_jsonb(gen_random_uuid()::text))
on conflict (key) do nothing;

alter table audit_anchors add column store_id uuid;
set local rods.allow_event_mutation = 'on';
update audit_anchors
   set store_id = (select (value #>> '{}')::uuid from rods_settings where key = 'audit.store_id');
-- The migrations run in one transaction: the bypass must not outlive this statement.
set local rods.allow_event_mutation = 'off';
alter table audit_anchors alter column store_id set not null;

-- Down Migration
alter table audit_anchors drop column store_id;
delete from rods_settings where key = 'audit.store_id';
