-- Up Migration
-- The reconciler (gateway/reconcile.ts) and `rods status` ask for a campaign's accepted batches
-- not yet published, every few seconds. Without this index that read walks every batch the
-- campaign ever had (its primary key's prefix); the partial index holds only the unpublished
-- ones, which are few, so the read stays as cheap on step 10,000 as on step 1.
create index ingestion_batches_unpublished on ingestion_batches (campaign_id, created_at)
  where status = 'accepted';

-- Down Migration
drop index ingestion_batches_unpublished;
