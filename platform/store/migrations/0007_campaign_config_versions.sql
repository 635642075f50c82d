-- Up Migration
-- Versioned campaign configs (aggregator/README.md, "Config versions"). Every change bumps
-- campaigns.config_version in the transaction that records CampaignReconfigured, so a running
-- aggregator re-checks one integer per batch; campaign_configs keeps each version with the
-- first step it applies to, so live folding and replay use the same thresholds for every step.
alter table campaigns add column config_version integer not null default 1;

create table campaign_configs (
  campaign_id text not null,
  version     integer not null,
  -- Reward groups of this step and later are folded with this version (until a newer one).
  from_step   bigint not null,
  config      jsonb not null,
  primary key (campaign_id, version)
);

-- Existing campaigns: their versions from the event store, in log order (changes recorded
-- before this migration apply from step 0, as the newest config did until now).
insert into campaign_configs (campaign_id, version, from_step, config)
select payload ->> 'campaignId',
       row_number() over (partition by payload ->> 'campaignId' order by transaction_id, position),
       0,
       (payload ->> 'config')::jsonb
  from events
 where type in ('CampaignStarted', 'CampaignReconfigured')
   and payload ->> 'campaignId' in (select campaign_id from campaigns);
insert into campaign_configs (campaign_id, version, from_step, config)
select campaign_id, 1, 0, config from campaigns c
 where not exists (select 1 from campaign_configs v where v.campaign_id = c.campaign_id);
update campaigns c set config_version = v.version
  from (select campaign_id, max(version) as version from campaign_configs group by campaign_id) v
 where v.campaign_id = c.campaign_id;

-- Down Migration
drop table campaign_configs;
alter table campaigns drop column config_version;
