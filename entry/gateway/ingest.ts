// Accepting a rollout batch: in one transaction (serialized per campaign step by an advisory
// lock), the batch is recognised as a duplicate of (campaign, step, batch id), or refused when
// its step is already closed, behind the last closed step, beyond the campaign's forward window
// or its groups exceed the campaign's reward limits, or stored as a claim check plus an
// ingestion_batches row. A duplicate is answered before any other check: whatever was accepted
// stays accepted. The same batch id with another body is a conflict (409), never a duplicate.
// The transaction is five round trips (begin, locks, one query for every check, one insert of
// both rows, commit): it holds the step's lock while the batch's records wait to be published.
import { createHash } from 'node:crypto';
import type pg from 'pg';
import type { CampaignConfig } from '../../domain/campaign-config.js';
import { rolloutBatchClaimId, workflowIds } from '../../domain/ids.js';
import { checkGroup } from '../../domain/reward-group.js';
import { campaignConfigOf } from '../../platform/config/campaign-config.js';
import type { RolloutBatchBody } from '../../platform/kafka/rollout-records.js';
import { lockIntake } from '../../platform/store/campaigns.js';
import { inTransaction } from '../../platform/store/db.js';
import { poolMembersAmong, poolMembersByBfclId } from '../../platform/store/pool/members.js';
import { batchIntake, insertAcceptedBatch } from '../../platform/store/steps/intake.js';
import { ProblemError } from './problem.js';
import type { RolloutBatch } from './schemas.js';

export interface Accepted {
  duplicate: boolean;
  workflowId: string;
  claimId: string;
  groups: number;
  close: boolean;
  /** A duplicate of a batch whose records are on the topic already. */
  published: boolean;
  /** A new batch: what its records are made of (the claim check's content). */
  body?: RolloutBatchBody;
  /** A new closing batch: the step's total group count, which its StepClosed declares (final). */
  stepGroups: number | null;
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
function stepProblem(
  campaignId: string,
  step: number,
  limits: IngestionLimits,
  lastClosed: number | null,
  open: boolean,
): ProblemError | null {
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
 * The groups as canonical JSON (platform/store/events/canonical.ts: keys sorted, no whitespace, numbers and
 * strings as JSON.stringify writes them), written directly for their fixed shape: the validated
 * batch holds only storable strings and finite numbers, so this is what canonicalJson gives
 * (ingest.unit.test.ts compares them). The claim check stores the same text.
 */
export function canonicalGroupsJson(groups: RolloutBatch['groups']): string {
  // One JSON.stringify over objects whose keys are in sorted order is the fastest way there.
  return JSON.stringify(groups.map((g) => ({ rewards: g.rewards, taskId: g.taskId })));
}

/**
 * SHA-256 (hex) of the batch's canonical JSON as parsed (sorted keys, no whitespace, numbers in
 * shortest form; an absent `close` is false), so key order, spacing and `1.0` vs `1` do not count.
 */
export function batchBodyHash(batch: RolloutBatch, groupsJson = canonicalGroupsJson(batch.groups)): string {
  return createHash('sha256')
    .update(`{"batchId":${JSON.stringify(batch.batchId)},"close":${batch.close ?? false},"groups":`, 'utf8')
    .update(groupsJson, 'utf8')
    .update(`,"policyVersion":${JSON.stringify(batch.policyVersion)}}`, 'utf8')
    .digest('hex');
}

const BFCL_DELIVERED_ID = /^multi_turn_[a-z_]+_(\d{7,})$/;

/**
 * The batch's groups with each task id a BFCL id the pool delivered for a generated task
 * (domain/ids.ts bfclTaskId; a seed's BFCL id is its rods id) replaced by its rods task id; under
 * `refuse`, a 422 naming the tasks never in the campaign's pool.
 */
async function poolTasks(
  c: pg.PoolClient,
  campaignId: string,
  groups: RolloutBatch['groups'],
  mode: IngestionLimits['ingestion']['unknownTasks'],
): Promise<RolloutBatch['groups']> {
  if (groups.length === 0) return groups;
  const members = new Set(
    await poolMembersAmong(
      c,
      campaignId,
      groups.map((g) => g.taskId),
    ),
  );
  const unknown = groups.filter((g) => !members.has(g.taskId));
  if (unknown.length === 0) return groups;
  // Ids the pool delivered generated tasks under, looked up by id (not every member the campaign had).
  const delivered = unknown.filter((g) => BFCL_DELIVERED_ID.test(g.taskId)).map((g) => g.taskId);
  const byBfclId =
    delivered.length > 0 ? await poolMembersByBfclId(c, campaignId, delivered) : new Map<string, string>();
  const mapped = groups.map((g) => {
    const rods = members.has(g.taskId) ? undefined : byBfclId.get(g.taskId);
    return rods ? { ...g, taskId: rods } : g;
  });
  if (mode === 'refuse') {
    const ids = new Set([...members, ...byBfclId.keys()]);
    const errors = groups.flatMap((g, i) =>
      ids.has(g.taskId)
        ? []
        : [
            {
              field: `groups[${i}].taskId`,
              message: `task ${JSON.stringify(g.taskId)} was never in the pool of campaign ${campaignId}`,
            },
          ],
    );
    if (errors.length > 0)
      throw new ProblemError(
        422,
        `invalid rollout batch: ${errors.length} task(s) not in the pool of campaign ${campaignId} (ingestion.unknownTasks = refuse): ${errors
          .slice(0, 5)
          .map((e) => e.message.split(' was')[0])
          .join(', ')}${errors.length > 5 ? ', ...' : ''}; report rewards under the pool row's rods_task_id`,
        errors,
        'unknown-task',
      );
  }
  // Two groups of one task (a rods id and its BFCL id) are refused as the schema refuses duplicates.
  const seen = new Map<string, number>();
  mapped.forEach((g, i) => {
    const j = seen.get(g.taskId);
    if (j !== undefined)
      throw new ProblemError(
        422,
        `invalid rollout batch: groups[${i}] and groups[${j}] are both for task ${g.taskId}`,
        [{ field: `groups[${i}].taskId`, message: `the same task as groups[${j}] (a BFCL id of it)` }],
      );
    seen.set(g.taskId, i);
  });
  return mapped.some((g, i) => g !== groups[i]) ? mapped : groups;
}

/** The 404 of a campaign that is not registered. */
export function unknownCampaign(campaignId: string): ProblemError {
  return new ProblemError(
    404,
    `unknown campaign ${JSON.stringify(campaignId)}`,
    undefined,
    'unknown-campaign',
  );
}

/**
 * Accepts a batch of a registered campaign (404 otherwise), whose limits (reward limits, forward
 * window) come from the campaign's config read under its lock.
 */
export async function acceptBatch(
  db: pg.Pool,
  campaignId: string,
  step: number,
  batch: RolloutBatch,
  /** When the batch was received (default now): its events' producedAt. */
  receivedAt = Date.now(),
): Promise<Accepted> {
  const workflowId = workflowIds.ingestion(campaignId, step, batch.batchId);
  const claimId = rolloutBatchClaimId(campaignId, step, batch.batchId);
  const groupsJson = canonicalGroupsJson(batch.groups);
  const bodyHash = batchBodyHash(batch, groupsJson);
  const close = batch.close ?? false;
  return inTransaction(db, async (c) => {
    const l = await lockIntake(c, campaignId, step, close);
    if (!l.found) throw unknownCampaign(campaignId);
    const limits: IngestionLimits = campaignConfigOf(l.config);
    const r = await batchIntake(c, campaignId, step, batch.batchId);
    // A row from before body hashes (NULL) matches any body.
    if (r.claim_id !== null && r.body_hash !== null && r.body_hash !== bodyHash)
      throw new ProblemError(
        409,
        `batch ${batch.batchId} of step ${step} of campaign ${campaignId} was accepted with another body; a batch id names one body: send other rewards under a new batch id`,
        undefined,
        'batch-conflict',
        { batchId: batch.batchId, step },
      );
    if (r.claim_id !== null)
      return {
        duplicate: true,
        workflowId: r.workflow_id!,
        claimId: r.claim_id,
        groups: r.groups!,
        close: r.closes!,
        published: r.status === 'published',
        stepGroups: null,
      };
    // Whatever was accepted stays accepted (the duplicate above); a stopped campaign takes nothing new.
    if (l.status === 'stopped')
      throw new ProblemError(
        409,
        `campaign ${campaignId} is stopped: it takes no new rollout batch (its history stays for replay and audit)`,
        undefined,
        'campaign-stopped',
      );
    if (r.closing_batch !== null)
      throw new ProblemError(
        409,
        `step ${step} of campaign ${campaignId} is already closed (by batch ${r.closing_batch})`,
        undefined,
        'step-closed',
      );
    if (r.step_closed)
      throw new ProblemError(
        409,
        `step ${step} of campaign ${campaignId} is already closed`,
        undefined,
        'step-closed',
      );
    const lastClosed = r.last_closed === null ? null : Number(r.last_closed);
    const refused =
      rewardLimitProblem(campaignId, step, batch, limits) ??
      stepProblem(campaignId, step, limits, lastClosed, r.open);
    if (refused) throw refused;
    // Rewards under a BFCL id the pool delivered count for its task; where the campaign refuses
    // unknown tasks, a task never in its pool is a 422 naming it (ingestion.unknownTasks).
    const groups = await poolTasks(c, campaignId, batch.groups, limits.ingestion.unknownTasks);
    const storedJson = groups === batch.groups ? groupsJson : canonicalGroupsJson(groups);
    const body: RolloutBatchBody = {
      campaignId,
      step,
      batchId: batch.batchId,
      policyVersion: batch.policyVersion,
      groups,
      close,
      receivedAt,
    };
    await insertAcceptedBatch(c, {
      body,
      groupCount: batch.groups.length,
      claimId,
      workflowId,
      bodyHash,
      groupsJson: storedJson,
    });
    return {
      duplicate: false,
      workflowId,
      claimId,
      groups: batch.groups.length,
      close,
      published: false,
      body,
      // No batch joins the step once this one commits, and the campaign's lock keeps the others
      // of the step out of the way until then: the sum is final.
      stepGroups: close ? r.step_groups + batch.groups.length : null,
    };
  });
}
