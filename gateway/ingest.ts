// Accepting a rollout batch: in one transaction (serialized per campaign step by an advisory
// lock), the batch is recognised as a duplicate of (campaign, step, batch id), or refused when
// its step is already closed, or stored as a claim check plus an ingestion_batches row.
import type pg from 'pg';
import type { RolloutBatchBody } from '../activities/ingestion.js';
import { rolloutBatchClaimId, workflowIds } from '../domain/ids.js';
import { inTransaction } from '../store/db.js';
import { ProblemError } from './problem.js';
import type { RolloutBatch } from './schemas.js';

export interface Accepted {
  duplicate: boolean;
  workflowId: string;
  claimId: string;
  groups: number;
  close: boolean;
}

export async function acceptBatch(
  db: pg.Pool,
  campaignId: string,
  step: number,
  batch: RolloutBatch,
): Promise<Accepted> {
  const workflowId = workflowIds.ingestion(campaignId, step, batch.batchId);
  const claimId = rolloutBatchClaimId(campaignId, step, batch.batchId);
  return inTransaction(db, async (c) => {
    await c.query('select pg_advisory_xact_lock(hashtextextended($1, 0))', [`ingest/${campaignId}/${step}`]);
    const dup = await c.query<{ groups: number; closes: boolean; workflow_id: string; claim_id: string }>(
      'select groups, closes, workflow_id, claim_id from ingestion_batches where campaign_id = $1 and step = $2 and batch_id = $3',
      [campaignId, step, batch.batchId],
    );
    const d = dup.rows[0];
    if (d)
      return {
        duplicate: true,
        workflowId: d.workflow_id,
        claimId: d.claim_id,
        groups: d.groups,
        close: d.closes,
      };
    const closed = await c.query<{ batch_id: string }>(
      'select batch_id from ingestion_batches where campaign_id = $1 and step = $2 and closes',
      [campaignId, step],
    );
    if (closed.rows[0])
      throw new ProblemError(
        409,
        `step ${step} of campaign ${campaignId} is already closed (by batch ${closed.rows[0].batch_id})`,
        undefined,
        'step-closed',
      );
    const steps = await c.query(
      'select 1 from steps where campaign_id = $1 and step = $2 and (closed_at is not null or declared_groups is not null)',
      [campaignId, step],
    );
    if (steps.rowCount)
      throw new ProblemError(
        409,
        `step ${step} of campaign ${campaignId} is already closed`,
        undefined,
        'step-closed',
      );
    const body: RolloutBatchBody = {
      campaignId,
      step,
      batchId: batch.batchId,
      policyVersion: batch.policyVersion,
      groups: batch.groups,
      close: batch.close ?? false,
      receivedAt: Date.now(),
    };
    await c.query(
      'insert into claim_checks (claim_id, kind, body) values ($1, $2, $3) on conflict (claim_id) do nothing',
      [claimId, 'rollout-batch', JSON.stringify(body)],
    );
    await c.query(
      `insert into ingestion_batches (campaign_id, step, batch_id, groups, closes, status, claim_id, workflow_id)
       values ($1, $2, $3, $4, $5, 'accepted', $6, $7)`,
      [campaignId, step, batch.batchId, batch.groups.length, body.close, claimId, workflowId],
    );
    return { duplicate: false, workflowId, claimId, groups: batch.groups.length, close: body.close };
  });
}
