-- Up Migration
-- The tokens of a model stage whose every answer was refused (StageFailed) go to synthesis_tokens
-- like a completion's, so that the cost ledger holds every token a generator request spent.
-- `stages` keeps counting stage completions that reported usage; `failed` counts the failed stage
-- runs that did, so a stage's row tells how many of the runs it paid for came to nothing. Kept by
-- the pool projection (platform/store/pool/funnel.ts); the backfill gives the same rows from the
-- events (none before this version of the worker, which needs the column to record one).
alter table synthesis_tokens add column failed bigint not null default 0;

insert into synthesis_tokens as t (campaign_id, stage, stages, failed, prompt_tokens, completion_tokens)
select payload->>'campaignId', payload->>'stage', 0, count(*),
       sum((payload->>'promptTokens')::bigint), sum(coalesce((payload->>'completionTokens')::bigint, 0))
  from events
 where type = 'StageFailed' and jsonb_typeof(payload->'promptTokens') = 'number'
 group by 1, 2
on conflict (campaign_id, stage) do update set failed = t.failed + excluded.failed,
  prompt_tokens = t.prompt_tokens + excluded.prompt_tokens,
  completion_tokens = t.completion_tokens + excluded.completion_tokens;

-- Down Migration
-- Back to the completions' tokens only (what 0027 keeps).
update synthesis_tokens t
   set prompt_tokens = t.prompt_tokens - f.prompt_tokens, completion_tokens = t.completion_tokens - f.completion_tokens
  from (select payload->>'campaignId' as campaign_id, payload->>'stage' as stage,
               sum((payload->>'promptTokens')::bigint) as prompt_tokens,
               sum(coalesce((payload->>'completionTokens')::bigint, 0)) as completion_tokens
          from events
         where type = 'StageFailed' and jsonb_typeof(payload->'promptTokens') = 'number'
         group by 1, 2) f
 where t.campaign_id = f.campaign_id and t.stage = f.stage;
delete from synthesis_tokens where stages = 0;
alter table synthesis_tokens drop column failed;
