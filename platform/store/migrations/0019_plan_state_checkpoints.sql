-- Up Migration
-- Each plan kept the whole pool state after it (about 80 KB a step at 800 tasks: 800 MB for a
-- 10,000-step campaign) and the task records of its selected seeds. Planning reads only the newest
-- state, and a past step's pool is the nearest kept state plus the plans recorded after it
-- (platform/store/campaign-plans.ts). So a plan keeps its state only at step 0, at every 100th step
-- and while it is the newest; an older plan drops its selected seeds' task records (a retried
-- planning activity returns only the newest plan).
alter table campaign_plans alter column state drop not null;
create index campaign_plans_states on campaign_plans (campaign_id, step) where state is not null;

-- Campaigns recorded before: the same, once.
update campaign_plans p
   set state = null,
       result = jsonb_set(p.result, '{selected}',
                          coalesce((select jsonb_agg(x - 'task') from jsonb_array_elements(p.result->'selected') x), '[]'::jsonb))
 where p.step % 100 <> 0
   and p.step < (select max(q.step) from campaign_plans q where q.campaign_id = p.campaign_id)
   and jsonb_typeof(p.result->'selected') = 'array';

-- Down Migration
drop index campaign_plans_states;
-- States dropped cannot come back: a down migration leaves them null (planning reads the newest, which is kept).
