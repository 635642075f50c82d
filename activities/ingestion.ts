// The ingestion activity: publishes one accepted rollout batch (read from its claim check in
// PostgreSQL) to the rewards topic, one RolloutGroupScored per group (key = task id) and, for
// the batch that closes its step, a StepClosed with the step's total group count (summed over
// the step's batches in ingestion_batches). It is the fallback of the gateway's direct publish
// (gateway/publish.ts), which sends the same records (rolloutBatchRecords) with the same ids.
// Event ids derive from (campaign, step, batch id, task id), so a retried activity, or one
// that repeats a direct publish cut short, re-sends the same ids and the aggregator counts each
// group once; a batch already marked published is not sent again.
import { ApplicationFailure } from '@temporalio/activity';
import type pg from 'pg';
import { encode, encoderFor } from '../codec/registry.js';
import { eventIds } from '../domain/ids.js';
import { openKafka } from '../kafka/client.js';
import type { OutgoingRecord } from '../kafka/port.js';
import { SharedProducer } from '../kafka/shared-producer.js';
import { REWARDS_TOPIC } from '../kafka/topology.js';

/** An accepted rollout batch: what its records are made of. */
export interface RolloutBatchBody {
  campaignId: string;
  step: number;
  batchId: string;
  policyVersion: string;
  groups: { taskId: string; rewards: number[] }[];
  close: boolean;
  /** When the gateway accepted the batch (ms since the epoch): the events' producedAt. */
  receivedAt: number;
}

/**
 * The claim check the gateway stores: the batch with its groups as JSON text (`groupsJson`),
 * which PostgreSQL keeps as one string instead of parsing every reward into a jsonb number.
 * Claim checks written before carry `groups` itself.
 */
export type StoredRolloutBatch = Omit<RolloutBatchBody, 'groups'> &
  ({ groupsJson: string } | { groups: RolloutBatchBody['groups'] });

export function storedRolloutBatch(body: RolloutBatchBody, groupsJson?: string): StoredRolloutBatch {
  const { groups, ...rest } = body;
  return { ...rest, groupsJson: groupsJson ?? JSON.stringify(groups) };
}

export function readStoredRolloutBatch(stored: StoredRolloutBatch): RolloutBatchBody {
  if (!('groupsJson' in stored)) return stored;
  const { groupsJson, ...rest } = stored;
  return { ...rest, groups: JSON.parse(groupsJson) as RolloutBatchBody['groups'] };
}

/** -0 is sent as 0, as JSON and so the claim check keep it: the same bytes from memory or the store. */
function hasNegativeZero(xs: number[]): boolean {
  for (const x of xs) if (x === 0 && 1 / x < 0) return true;
  return false;
}

let encodeGroup: ReturnType<typeof encoderFor<'RolloutGroupScored'>> | undefined;

/**
 * The RolloutGroupScored records of a batch's groups from..to (default all), in order (key =
 * task id), pushed onto `out`.
 */
export function rolloutGroupRecords(
  body: Omit<RolloutBatchBody, 'close'>,
  from = 0,
  to = body.groups.length,
  out: OutgoingRecord[] = [],
): OutgoingRecord[] {
  encodeGroup ??= encoderFor('RolloutGroupScored');
  const { campaignId, step, batchId, policyVersion, receivedAt } = body;
  for (let i = from; i < to; i++) {
    const g = body.groups[i]!;
    out.push({
      key: g.taskId,
      value: encodeGroup({
        eventId: eventIds.rolloutGroupScored(campaignId, step, batchId, g.taskId),
        campaignId,
        taskId: g.taskId,
        step,
        policyVersion,
        rewards: hasNegativeZero(g.rewards) ? g.rewards.map((r) => r + 0) : g.rewards,
        producedAt: receivedAt,
      }),
    });
  }
  return out;
}

/** The StepClosed record a closing batch ends with, declaring the step's total group count. */
export function stepClosedRecord(
  body: Pick<RolloutBatchBody, 'campaignId' | 'step' | 'receivedAt'>,
  stepGroups: number,
): OutgoingRecord {
  return {
    key: `${body.campaignId}/step-close`,
    value: encode('StepClosed', {
      eventId: eventIds.stepClosed(body.campaignId, body.step),
      campaignId: body.campaignId,
      step: body.step,
      groupCount: stepGroups,
      producedAt: body.receivedAt,
    }),
  };
}

/**
 * Every record of a batch: its groups, then (when it closes its step) the StepClosed. The gateway
 * and the activity both send exactly these, so whichever publishes, the records are the same.
 */
export function rolloutBatchRecords(body: RolloutBatchBody, stepGroups: number | null): OutgoingRecord[] {
  const records = rolloutGroupRecords(body);
  if (body.close) records.push(stepClosedRecord(body, stepGroups!));
  return records;
}

/**
 * Marks a batch published once its records are on the topic. `asyncCommit` (the gateway's direct
 * publish) commits without waiting for the WAL flush: losing that mark to a PostgreSQL crash only
 * makes the reconciler start the batch's ingestion workflow, which publishes it again (the
 * aggregator drops the repeated event ids) and marks it. The activity's mark is synchronous: a
 * completed workflow is never started again, so its mark must not be lost.
 */
export async function markPublished(
  db: pg.Pool,
  b: { campaignId: string; step: number; batchId: string },
  stepGroups: number | null,
  opts: { asyncCommit?: boolean } = {},
): Promise<void> {
  const params = [b.campaignId, b.step, b.batchId, stepGroups];
  const set = `set status = 'published', published_at = now(), step_groups = $4
     where campaign_id = $1 and step = $2 and batch_id = $3 and status = 'accepted'`;
  if (!opts.asyncCommit) await db.query(`update ingestion_batches ${set}`, params);
  // set_config(..., true) lasts until the end of this statement's own transaction: its commit.
  else
    await db.query(
      `with async_commit as materialized (select set_config('synchronous_commit', 'off', true) as v)
       update ingestion_batches ${set} and (select v from async_commit) = 'off'`,
      params,
    );
}

export interface IngestionInput {
  claimId: string;
  /** Rewards topic (default rods.rewards.v1). */
  topic?: string;
}

export interface IngestionResult {
  campaignId: string;
  step: number;
  batchId: string;
  groups: number;
  /** Kafka records this execution sent (0 when the batch had already been published). */
  published: number;
  /** The StepClosed group count when this batch closed its step. */
  stepGroups: number | null;
}

const CHUNK = 2000;

export function createIngestionActivities(deps: {
  pool: pg.Pool;
  /** The process's producer (the worker closes it at shutdown); default: one of this activity set's own. */
  producer?: SharedProducer;
}) {
  const producer = deps.producer ?? new SharedProducer(() => openKafka({ clientId: 'rods-ingestion' }));
  return {
    async publishRolloutBatch(input: IngestionInput): Promise<IngestionResult> {
      const claim = await deps.pool.query<{ body: StoredRolloutBatch }>(
        'select body from claim_checks where claim_id = $1',
        [input.claimId],
      );
      const stored = claim.rows[0]?.body;
      if (!stored) throw ApplicationFailure.nonRetryable(`no claim check ${input.claimId}`, 'MissingClaim');
      const body = readStoredRolloutBatch(stored);
      const { campaignId, step, batchId } = body;
      const row = await deps.pool.query<{ status: string; step_groups: number | null }>(
        'select status, step_groups from ingestion_batches where campaign_id = $1 and step = $2 and batch_id = $3',
        [campaignId, step, batchId],
      );
      const batch = row.rows[0];
      if (!batch)
        throw ApplicationFailure.nonRetryable(
          `no ingestion batch for claim ${input.claimId}`,
          'MissingBatch',
        );
      const result = (published: number, stepGroups: number | null): IngestionResult => ({
        campaignId,
        step,
        batchId,
        groups: body.groups.length,
        published,
        stepGroups,
      });
      if (batch.status === 'published') return result(0, batch.step_groups);

      let stepGroups: number | null = null;
      if (body.close) {
        // No batch joins a step once its closing batch is accepted (the gateway refuses it), so
        // the sum is final.
        const sum = await deps.pool.query<{ n: number }>(
          'select coalesce(sum(groups), 0)::int as n from ingestion_batches where campaign_id = $1 and step = $2',
          [campaignId, step],
        );
        stepGroups = sum.rows[0]!.n;
      }
      const messages = rolloutBatchRecords(body, stepGroups);
      await producer.send(input.topic ?? REWARDS_TOPIC, messages, CHUNK);
      await markPublished(deps.pool, body, stepGroups);
      return result(messages.length, stepGroups);
    },
  };
}

export type IngestionActivities = ReturnType<typeof createIngestionActivities>;
