// Accepting a batch (the rule is entry/gateway/ingest.ts): what is already known of the batch and its
// step, read in one round trip under the step's lock, and the claim check and ingestion_batches
// row written in one statement.
import type pg from 'pg';
import type { RolloutBatchBody } from '../../kafka/rollout-records.js';
import type { StoredRolloutBatch } from './batches.js';

/** The batch's row if it was accepted before (d.*), and its step's state. */
export interface BatchIntake {
  groups: number | null;
  closes: boolean | null;
  workflow_id: string | null;
  claim_id: string | null;
  body_hash: string | null;
  status: string | null;
  closing_batch: string | null;
  step_closed: boolean;
  last_closed: string | null;
  open: boolean;
  step_groups: number;
}

/** What is known of batch `batchId` of the step, and of the step and campaign's closed steps. */
export async function batchIntake(
  c: pg.PoolClient,
  campaignId: string,
  step: number,
  batchId: string,
): Promise<BatchIntake> {
  const { rows } = await c.query<BatchIntake>(
    `select d.groups, d.closes, d.workflow_id, d.claim_id, d.body_hash, d.status,
            (select batch_id from ingestion_batches
              where campaign_id = $1 and step = $2 and closes limit 1) as closing_batch,
            exists (select 1 from steps where campaign_id = $1 and step = $2
                       and (closed_at is not null or declared_groups is not null)) as step_closed,
            greatest(
              (select max(step) from steps
                where campaign_id = $1 and (closed_at is not null or declared_groups is not null)),
              (select max(step) from ingestion_batches where campaign_id = $1 and closes)
            )::bigint as last_closed,
            exists (select 1 from ingestion_batches where campaign_id = $1 and step = $2)
              or exists (select 1 from steps where campaign_id = $1 and step = $2) as open,
            (select coalesce(sum(groups), 0) from ingestion_batches
              where campaign_id = $1 and step = $2)::int as step_groups
       from (select 1) one
       left join ingestion_batches d on d.campaign_id = $1 and d.step = $2 and d.batch_id = $3`,
    [campaignId, step, batchId],
  );
  return rows[0]!;
}

/** Stores the claim check and the batch's ingestion_batches row ('accepted'). */
export async function insertAcceptedBatch(
  c: pg.PoolClient,
  b: {
    body: RolloutBatchBody;
    groupCount: number;
    claimId: string;
    workflowId: string;
    bodyHash: string;
    groupsJson: string;
  },
): Promise<void> {
  // The claim check (StoredRolloutBatch): the groups' JSON text travels as a text parameter,
  // so neither side escapes or parses it again.
  const { groups: _groups, ...meta } = b.body;
  await c.query(
    `with claim as (
       insert into claim_checks (claim_id, kind, body)
       values ($6, 'rollout-batch', $9::jsonb || jsonb_build_object('groupsJson', $10::text))
       on conflict (claim_id) do nothing)
     insert into ingestion_batches (campaign_id, step, batch_id, groups, closes, status, claim_id, workflow_id, body_hash)
     values ($1, $2, $3, $4, $5, 'accepted', $6, $7, $8)`,
    [
      b.body.campaignId,
      b.body.step,
      b.body.batchId,
      b.groupCount,
      b.body.close,
      b.claimId,
      b.workflowId,
      b.bodyHash,
      JSON.stringify(meta satisfies Omit<StoredRolloutBatch, 'groupsJson'>),
      b.groupsJson,
    ],
  );
}
