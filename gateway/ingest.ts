// Accepting a rollout batch: in one transaction (serialized per campaign step by an advisory
// lock), the batch is recognised as a duplicate of (campaign, step, batch id), or refused when
// its step is already closed, behind the last closed step, beyond the campaign's forward window
// or its groups exceed the campaign's reward limits, or stored as a claim check plus an
// ingestion_batches row. A duplicate is answered before any other check: whatever was accepted
// stays accepted. The same batch id with another body is a conflict (409), never a duplicate.
import { createHash } from 'node:crypto';
import type pg from 'pg';
import type { RolloutBatchBody } from '../activities/ingestion.js';
import type { CampaignConfig } from '../domain/campaign-config.js';
import { rolloutBatchClaimId, workflowIds } from '../domain/ids.js';
import { checkGroup } from '../domain/reward-group.js';
import { canonicalJson } from '../store/canonical.js';
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

export type IngestionLimits = Pick<CampaignConfig, 'rewards' | 'ingestion'>;

/**
 * The groups the aggregator would dead-letter for their size: the same rule (checkGroup) with the
 * same campaign value (rewards.maxRollouts), so the gateway never accepts what it refuses.
 */
function rewardLimitProblem(
  campaignId: string,
  step: number,
  batch: RolloutBatch,
  limits: IngestionLimits,
): ProblemError | null {
  const errors = batch.groups.flatMap((g, i) => {
    const r = checkGroup(g.rewards, step, undefined, limits.rewards);
    return r ? [{ field: `groups[${i}].rewards`, message: `${r.reason} (rewards.maxRollouts)` }] : [];
  });
  if (errors.length === 0) return null;
  return new ProblemError(
    422,
    `invalid rollout batch: campaign ${campaignId} takes at most rewards.maxRollouts = ${limits.rewards.maxRollouts} rewards per group: ${errors.map((e) => `${e.field}: ${e.message}`).join('; ')}`,
    errors,
    undefined,
    { maxRollouts: limits.rewards.maxRollouts },
  );
}

/**
 * A step the campaign can still close: an open step (batches or statistics already recorded), or
 * a new step neither behind the last closed one (steps close in order: it would never close and
 * hold every later step) nor more than ingestion.maxStepsAhead past it (its groups would make
 * every later group of their tasks stale). Closed means closed by the aggregator, declared by a
 * StepClosed, or closed by a batch here; before any, the window starts at step 0.
 */
async function stepProblem(
  c: pg.PoolClient,
  campaignId: string,
  step: number,
  limits: IngestionLimits,
): Promise<ProblemError | null> {
  const { rows } = await c.query<{ last_closed: number | null; open: boolean }>(
    `select greatest(
              (select max(step) from steps
                where campaign_id = $1 and (closed_at is not null or declared_groups is not null)),
              (select max(step) from ingestion_batches where campaign_id = $1 and closes)
            )::bigint as last_closed,
            exists (select 1 from ingestion_batches where campaign_id = $1 and step = $2)
              or exists (select 1 from steps where campaign_id = $1 and step = $2) as open`,
    [campaignId, step],
  );
  const { last_closed: lastClosed, open } = rows[0]!;
  if (open) return null;
  if (lastClosed !== null && step < lastClosed)
    return new ProblemError(
      409,
      `step ${step} of campaign ${campaignId} is behind its last closed step ${lastClosed}: steps close in order, so a step opened behind it would never close`,
      undefined,
      'step-behind',
      { step, lastClosedStep: lastClosed },
    );
  const ahead = limits.ingestion.maxStepsAhead;
  const maxStep = (lastClosed ?? 0) + ahead;
  if (step > maxStep) {
    const message = `step ${step} is beyond the forward window of campaign ${campaignId}: at most ingestion.maxStepsAhead = ${ahead} steps past the last closed step ${lastClosed ?? '(none yet: 0)'}, so at most step ${maxStep}`;
    return new ProblemError(422, message, [{ field: 'step', message }], 'step-out-of-window', {
      step,
      lastClosedStep: lastClosed,
      maxStepsAhead: ahead,
      maxStep,
    });
  }
  return null;
}

/**
 * SHA-256 (hex) of the batch's canonical JSON as parsed (sorted keys, no whitespace, numbers in
 * shortest form; an absent `close` is false), so key order, spacing and `1.0` vs `1` do not count.
 */
export function batchBodyHash(batch: RolloutBatch): string {
  const canonical = canonicalJson({
    batchId: batch.batchId,
    policyVersion: batch.policyVersion,
    groups: batch.groups.map((g) => ({ taskId: g.taskId, rewards: g.rewards })),
    close: batch.close ?? false,
  });
  return createHash('sha256').update(canonical, 'utf8').digest('hex');
}

export async function acceptBatch(
  db: pg.Pool,
  campaignId: string,
  step: number,
  batch: RolloutBatch,
  limits: IngestionLimits,
): Promise<Accepted> {
  const workflowId = workflowIds.ingestion(campaignId, step, batch.batchId);
  const claimId = rolloutBatchClaimId(campaignId, step, batch.batchId);
  const bodyHash = batchBodyHash(batch);
  return inTransaction(db, async (c) => {
    // A closing batch waits for the campaign's batches in flight and holds new ones back, so no
    // batch opens a step behind it unseen; batches that do not close run side by side.
    await c.query(
      `select ${batch.close ? 'pg_advisory_xact_lock' : 'pg_advisory_xact_lock_shared'}(hashtextextended($1, 0))`,
      [`ingest/${campaignId}`],
    );
    await c.query('select pg_advisory_xact_lock(hashtextextended($1, 0))', [`ingest/${campaignId}/${step}`]);
    const dup = await c.query<{
      groups: number;
      closes: boolean;
      workflow_id: string;
      claim_id: string;
      body_hash: string | null;
    }>(
      'select groups, closes, workflow_id, claim_id, body_hash from ingestion_batches where campaign_id = $1 and step = $2 and batch_id = $3',
      [campaignId, step, batch.batchId],
    );
    const d = dup.rows[0];
    // A row from before body hashes (NULL) matches any body.
    if (d && d.body_hash !== null && d.body_hash !== bodyHash)
      throw new ProblemError(
        409,
        `batch ${batch.batchId} of step ${step} of campaign ${campaignId} was accepted with another body; a batch id names one body: send other rewards under a new batch id`,
        undefined,
        'batch-conflict',
        { batchId: batch.batchId, step },
      );
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
    const refused =
      rewardLimitProblem(campaignId, step, batch, limits) ?? (await stepProblem(c, campaignId, step, limits));
    if (refused) throw refused;
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
      `insert into ingestion_batches (campaign_id, step, batch_id, groups, closes, status, claim_id, workflow_id, body_hash)
       values ($1, $2, $3, $4, $5, 'accepted', $6, $7, $8)`,
      [campaignId, step, batch.batchId, batch.groups.length, body.close, claimId, workflowId, bodyHash],
    );
    return { duplicate: false, workflowId, claimId, groups: batch.groups.length, close: body.close };
  });
}
