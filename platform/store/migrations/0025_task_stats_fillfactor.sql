-- Up Migration
-- Every step updates each active task's row (its statistics and dedupe window, about a kilobyte):
-- with full pages, most updates wrote the new version elsewhere, touched every index and left the
-- old one for vacuum, which on this churn fell behind, so the table and every read of it grew
-- with the campaign's age (163 MB for 30,000 rows in a 2,000-step run). Half-empty pages keep an
-- update on its page (a heap-only tuple: no index write, pruned without vacuum), and vacuum runs
-- on this table once 2 % of it is dead, without the cost-based pauses.
alter table task_stats set (fillfactor = 50, autovacuum_vacuum_scale_factor = 0.02, autovacuum_vacuum_cost_delay = 0);

-- Down Migration
alter table task_stats reset (fillfactor, autovacuum_vacuum_scale_factor, autovacuum_vacuum_cost_delay);
