-- Up Migration
-- The generator's tokens per campaign and synthesis stage, from StageCompleted's usage fields
-- (schema version 2; older events carry none): what a candidate, a validated and an injected task
-- cost in tokens, read in one row per stage. Kept by the pool projection with the funnel
-- (platform/store/pool/funnel.ts), rebuilt by replay.
create table synthesis_tokens (
  campaign_id       text not null,
  stage             text not null,
  -- stage completions that reported usage, and their tokens
  stages            bigint not null default 0,
  prompt_tokens     bigint not null default 0,
  completion_tokens bigint not null default 0,
  primary key (campaign_id, stage)
);

insert into synthesis_tokens (campaign_id, stage, stages, prompt_tokens, completion_tokens)
select payload->>'campaignId', payload->>'stage', count(*),
       sum((payload->>'promptTokens')::bigint), sum(coalesce((payload->>'completionTokens')::bigint, 0))
  from events
 where type = 'StageCompleted' and jsonb_typeof(payload->'promptTokens') = 'number'
 group by 1, 2;

-- Down Migration
drop table synthesis_tokens;
