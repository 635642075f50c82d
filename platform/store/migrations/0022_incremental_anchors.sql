-- Up Migration
-- An anchor stored every stream's head, so each one grew with every synthesis run the store ever
-- had, and the table with the square of the store's age (an anchor every 10 minutes). An anchor
-- now stores only the heads that differ from the anchor before it of the same scope (its base),
-- and a full set every 1,000 anchors of a scope (platform/store/events/audit.ts). The digest
-- still covers every stream's head: verification rebuilds the full set from the chain.
alter table audit_anchors add column base_anchor_id bigint references audit_anchors (anchor_id);
comment on column audit_anchors.heads is
  'with base_anchor_id null: every head of the scope; else only those that differ from the base''s full set';

-- Down Migration
alter table audit_anchors drop column base_anchor_id;
