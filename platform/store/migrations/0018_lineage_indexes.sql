-- Up Migration
-- A lineage lookup (`rods lineage TASK`, the dashboard's lineage) read the campaign's whole
-- decision stream and every CandidateValidated of the campaign to show one task's ancestry, a cost
-- that grew with every step. It reads the events of the ancestry's tasks now, found by task id:
-- a task's seeding, injection and retirement through the first index, a candidate's validations
-- through the second, the PoolPruned events that name a task (payload containment of
-- {"campaignId", "pruned": [{"taskId"}]}) through the third. The SeedSelected a derivation
-- names is found by its event id (the unique index of 0002).
create index events_task_decisions on events ((payload ->> 'campaignId'), (payload ->> 'taskId'))
  where type in ('TaskSeeded', 'TaskInjected', 'TaskRetired');
create index events_validated_candidates on events ((payload ->> 'campaignId'), (payload ->> 'candidateId'))
  where type = 'CandidateValidated';
create index events_pool_pruned on events using gin (payload jsonb_path_ops)
  where type = 'PoolPruned';

-- Down Migration
drop index events_pool_pruned;
drop index events_validated_candidates;
drop index events_task_decisions;
