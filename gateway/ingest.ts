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
import { type CampaignConfig, parseCampaignConfig } from '../domain/campaign-config.js';
import { bfclTaskId, rolloutBatchClaimId, workflowIds } from '../domain/ids.js';
import { checkGroup } from '../domain/reward-group.js';
import type { RolloutBatchBody } from '../kafka/rollout-records.js';
import { inTransaction } from '../store/db.js';
import type { StoredRolloutBatch } from '../store/ingestion-batches.js';
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
 * The groups as canonical JSON (store/canonical.ts: keys sorted, no whitespace, numbers and
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
  const { rows } = await c.query<{ task_id: string }>(
    'select task_id from pool_members where campaign_id = $1 and task_id = any($2::text[])',
    [campaignId, groups.map((g) => g.taskId)],
  );
  const members = new Set(rows.map((r) => r.task_id));
  const unknown = groups.filter((g) => !members.has(g.taskId));
  if (unknown.length === 0) return groups;
  let byBfclId = new Map<string, string>();
  if (unknown.some((g) => BFCL_DELIVERED_ID.test(g.taskId))) {
    const generated = await c.query<{ task_id: string; category: string }>(
      `select task_id, category from pool_members where campaign_id = $1 and origin = 'generated'`,
      [campaignId],
    );
    byBfclId = new Map(generated.rows.map((r) => [bfclTaskId(r.task_id, r.category), r.task_id]));
  }
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

/** Whether the server compresses TOAST with lz4 (learnt from the first acceptance). */
let lz4: boolean | undefined;

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
    // A closing batch waits for the campaign's batches in flight and holds new ones back, so no
    // batch opens a step behind it unseen; batches that do not close run side by side. The
    // campaign's lock is taken first (the subquery runs before the outer select list). The same
    // round trip has the claim check compressed with lz4 where the server has it: several times
    // faster than the default pglz on a claim check's hundreds of KiB.
    const compression =
      lz4 === undefined
        ? `(select set_config('default_toast_compression', 'lz4', true) from pg_settings
             where name = 'default_toast_compression' and 'lz4' = any(enumvals))`
        : lz4
          ? `set_config('default_toast_compression', 'lz4', true)`
          : 'null';
    const locked = await c.query<{
      config: unknown;
      status: string | null;
      found: boolean;
      compression: string | null;
    }>(
      `select pg_advisory_xact_lock(hashtextextended($2, 0)), ${compression} as compression,
              (select config from campaigns where campaign_id = $3) as config,
              (select status from campaigns where campaign_id = $3) as status,
              exists (select 1 from campaigns where campaign_id = $3) as found
         from (select ${close ? 'pg_advisory_xact_lock' : 'pg_advisory_xact_lock_shared'}(hashtextextended($1, 0))) campaign_lock`,
      [`ingest/${campaignId}`, `ingest/${campaignId}/${step}`, campaignId],
    );
    const l = locked.rows[0]!;
    lz4 ??= l.compression === 'lz4';
    if (!l.found) throw unknownCampaign(campaignId);
    const limits: IngestionLimits = parseCampaignConfig(l.config);
    const { rows } = await c.query<{
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
    }>(
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
      [campaignId, step, batch.batchId],
    );
    const r = rows[0]!;
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
    // The claim check (StoredRolloutBatch): the groups' JSON text travels as a text parameter,
    // so neither side escapes or parses it again.
    const { groups: _groups, ...meta } = body;
    await c.query(
      `with claim as (
         insert into claim_checks (claim_id, kind, body)
         values ($6, 'rollout-batch', $9::jsonb || jsonb_build_object('groupsJson', $10::text))
         on conflict (claim_id) do nothing)
       insert into ingestion_batches (campaign_id, step, batch_id, groups, closes, status, claim_id, workflow_id, body_hash)
       values ($1, $2, $3, $4, $5, 'accepted', $6, $7, $8)`,
      [
        campaignId,
        step,
        batch.batchId,
        batch.groups.length,
        close,
        claimId,
        workflowId,
        bodyHash,
        JSON.stringify(meta satisfies Omit<StoredRolloutBatch, 'groupsJson'>),
        storedJson,
      ],
    );
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
