// The ingestion activity: publishes one accepted rollout batch (read from its claim check in
// PostgreSQL) to the rewards topic, one RolloutGroupScored per group (key = task id) and, for
// the batch that closes its step, a StepClosed with the step's total group count (summed over
// the step's batches in ingestion_batches). Event ids derive from (campaign, step, batch id,
// task id), so a retried activity re-sends the same ids and the aggregator counts each group
// once; a batch already marked published is not sent again.
import { ApplicationFailure } from '@temporalio/activity';
import type pg from 'pg';
import { encode } from '../codec/registry.js';
import { eventIds } from '../domain/ids.js';
import { openKafka } from '../kafka/client.js';
import { SharedProducer } from '../kafka/shared-producer.js';
import { REWARDS_TOPIC } from '../kafka/topology.js';

/** What the gateway stores as the claim check of a rollout batch. */
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
      const claim = await deps.pool.query<{ body: RolloutBatchBody }>(
        'select body from claim_checks where claim_id = $1',
        [input.claimId],
      );
      const body = claim.rows[0]?.body;
      if (!body) throw ApplicationFailure.nonRetryable(`no claim check ${input.claimId}`, 'MissingClaim');
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

      const messages = body.groups.map((g) => ({
        key: g.taskId,
        value: encode('RolloutGroupScored', {
          eventId: eventIds.rolloutGroupScored(campaignId, step, batchId, g.taskId),
          campaignId,
          taskId: g.taskId,
          step,
          policyVersion: body.policyVersion,
          rewards: g.rewards,
          producedAt: body.receivedAt,
        }),
      }));
      let stepGroups: number | null = null;
      if (body.close) {
        // No batch joins a step once its closing batch is accepted (the gateway refuses it), so
        // the sum is final.
        const sum = await deps.pool.query<{ n: number }>(
          'select coalesce(sum(groups), 0)::int as n from ingestion_batches where campaign_id = $1 and step = $2',
          [campaignId, step],
        );
        stepGroups = sum.rows[0]!.n;
        messages.push({
          key: `${campaignId}/step-close`,
          value: encode('StepClosed', {
            eventId: eventIds.stepClosed(campaignId, step),
            campaignId,
            step,
            groupCount: stepGroups,
            producedAt: body.receivedAt,
          }),
        });
      }
      await producer.send(input.topic ?? REWARDS_TOPIC, messages, CHUNK);
      await deps.pool.query(
        `update ingestion_batches set status = 'published', published_at = now(), step_groups = $4
          where campaign_id = $1 and step = $2 and batch_id = $3`,
        [campaignId, step, batchId, stepGroups],
      );
      return result(messages.length, stepGroups);
    },
  };
}

export type IngestionActivities = ReturnType<typeof createIngestionActivities>;
