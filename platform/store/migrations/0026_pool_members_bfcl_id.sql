-- Up Migration
-- A trainer reports a generated task's rewards under the id the pool delivered it with, BFCL's
-- (domain/ids.ts bfclTaskId: a seed keeps its id, any other task gets multi_turn_<category>_<n>,
-- n = 1,000,000 + the first 48 bits of SHA-256 of "bfcl-task-id", U+001F and its rods id). The
-- gateway mapped such ids back by reading every generated member the campaign ever had, on every
-- batch; each member now keeps its BFCL id, found through an index.
alter table pool_members add column bfcl_id text;
update pool_members m set bfcl_id = case
    when m.task_id ~ ('^multi_turn_' || coalesce(m.task->>'category', m.category) || '_[0-9]+$') then m.task_id
    else 'multi_turn_' || coalesce(m.task->>'category', m.category) || '_' ||
         (1000000 + ('x' || encode(substring(sha256(convert_to('bfcl-task-id' || chr(31) || m.task_id, 'UTF8')) from 1 for 6), 'hex'))::bit(48)::bigint)::text
  end;
create index pool_members_bfcl_id on pool_members (campaign_id, bfcl_id);

-- Down Migration
drop index pool_members_bfcl_id;
alter table pool_members drop column bfcl_id;
