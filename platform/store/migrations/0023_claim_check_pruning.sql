-- Up Migration
-- A claim check kept every accepted batch's rewards for good: about a hundred kilobytes a step at
-- 800 tasks, the table growing with every reward the campaign had. Once a batch is published its
-- rewards are on the rewards topic, and once its step closed they are counted; the aggregator
-- empties the claim checks of a step when it closes the step CLAIM_CHECK_STEPS later
-- (platform/store/steps/batches.ts). The row stays (the batch's row refers to it), its body goes.
alter table claim_checks alter column body drop not null;
alter table claim_checks add column pruned_at timestamptz;

-- Down Migration
alter table claim_checks drop column pruned_at;
