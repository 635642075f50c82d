-- Up Migration
-- Reading one campaign's history in log order (replay, export, lineage) without scanning the
-- whole log: every event payload carries its campaignId.
create index events_campaign_order on events ((payload ->> 'campaignId'), transaction_id, position);

-- Down Migration
drop index events_campaign_order;
