-- Up Migration
-- Which campaigns know a task (`rods lineage TASK` without --campaign, and the dashboard's 404
-- that says another campaign has the task) was read from the event log by task id, a scan of
-- every event of every campaign. It reads the pool and candidate projections now: these indexes
-- find a task id there without walking every campaign's rows.
create index pool_members_task on pool_members (task_id);
create index candidates_candidate_id on candidates (candidate_id);

-- Down Migration
drop index candidates_candidate_id;
drop index pool_members_task;
