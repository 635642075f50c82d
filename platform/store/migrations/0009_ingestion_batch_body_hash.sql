-- Up Migration
-- The digest of a batch's body as accepted (gateway/ingest.ts, batchBodyHash): the same batch id
-- sent again with another body is refused (409) instead of answered as a duplicate while its new
-- content is dropped. Rows accepted before this column have NULL and match any body.
alter table ingestion_batches add column body_hash text;

-- Down Migration
alter table ingestion_batches drop column body_hash;
