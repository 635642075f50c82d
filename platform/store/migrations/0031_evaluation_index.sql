-- Up Migration
-- A campaign's evaluations (rods eval list, the dashboard's accuracy panel, polled every 10 s) are
-- found by their EvaluationStarted: without this index the read walks the campaign's whole event
-- history through the campaign-id index, more each step. Partial: one entry per evaluation.
create index events_evaluation_started on events ((payload->>'campaignId'), transaction_id, position)
  where type = 'EvaluationStarted';

-- Down Migration
drop index if exists events_evaluation_started;
