// The ingestion activity: publishes one accepted rollout batch (read from its claim check in
// PostgreSQL) to the rewards topic, one RolloutGroupScored per group (key = task id) and, for
// the batch that closes its step, a StepClosed with the step's total group count (summed over
// the step's batches in ingestion_batches). It is the fallback of the gateway's direct publish
// (entry/gateway/publish.ts), which sends the same records (platform/kafka/rollout-records.ts) with the same ids.
// Event ids derive from (campaign, step, batch id, task id), so a retried activity, or one
// that repeats a direct publish cut short, re-sends the same ids and the aggregator counts each
// group once; a batch already marked published is not sent again.
import { ApplicationFailure } from '@temporalio/activity';
import type pg from 'pg';
import { openKafka } from '../platform/kafka/client.js';
import { rolloutBatchRecords } from '../platform/kafka/rollout-records.js';
import { SharedProducer } from '../platform/kafka/shared-producer.js';
import { REWARDS_TOPIC } from '../platform/kafka/topology.js';
import {
  batchOfClaim,
  batchPublication,
  markPublished,
  readClaimCheck,
  readStoredRolloutBatch,
  stepGroupTotal,
} from '../platform/store/steps/batches.js';

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
      const stored = await readClaimCheck(deps.pool, input.claimId);
      if (!stored) throw ApplicationFailure.nonRetryable(`no claim check ${input.claimId}`, 'MissingClaim');
      if (stored === 'pruned') {
        // Only a published batch's claim check is emptied (platform/store/steps/batches.ts): a
        // repeat of its publication has nothing left to do.
        const b = await batchOfClaim(deps.pool, input.claimId);
        if (b?.status !== 'published')
          throw ApplicationFailure.nonRetryable(
            `claim check ${input.claimId} was emptied before its batch was published`,
            'MissingClaim',
          );
        return {
          campaignId: b.campaignId,
          step: b.step,
          batchId: b.batchId,
          groups: b.groups,
          published: 0,
          stepGroups: b.stepGroups,
        };
      }
      const body = readStoredRolloutBatch(stored);
      const { campaignId, step, batchId } = body;
      const batch = await batchPublication(deps.pool, body);
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
      if (batch.status === 'published') return result(0, batch.stepGroups);

      let stepGroups: number | null = null;
      if (body.close) {
        stepGroups = await stepGroupTotal(deps.pool, campaignId, step);
      }
      const messages = rolloutBatchRecords(body, stepGroups);
      await producer.send(input.topic ?? REWARDS_TOPIC, messages, CHUNK);
      await markPublished(deps.pool, body, stepGroups);
      return result(messages.length, stepGroups);
    },
  };
}

export type IngestionActivities = ReturnType<typeof createIngestionActivities>;
