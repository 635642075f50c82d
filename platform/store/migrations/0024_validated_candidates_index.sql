-- Up Migration
-- Planning reads the campaign's validated candidates (the injection queue) every step, in the
-- order they were validated; without an index that names them it read every candidate the
-- campaign ever had (injected and rejected ones included) to find the few still queued.
create index candidates_validated on candidates (campaign_id, created_at, candidate_id) where status = 'validated';

-- Down Migration
drop index candidates_validated;
