// Rollouts: a trainer posts a step's scored groups. The batch is accepted with its claim check
// in one transaction (entry/gateway/ingest.ts), then published to Kafka here, or by its ingestion
// workflow when that fails (entry/gateway/publish.ts); a retried batch is a duplicate, never counted twice.
import { WorkflowExecutionAlreadyStartedError, WorkflowIdReusePolicy } from '@temporalio/client';
import type { FastifyInstance } from 'fastify';
import type { OutgoingRecord } from '../../../platform/kafka/port.js';
import { REWARDS_TOPIC } from '../../../platform/kafka/topology.js';
import { type IngestionInput, ingestionWorkflow } from '../../../workflows/ingestion.js';
import { ACCESS } from '../access.js';
import { acceptBatch } from '../ingest.js';
import { ProblemError, parseOr422 } from '../problem.js';
import { RolloutBatch, StepParams } from '../schemas.js';
import type { RouteContext } from './context.js';

export function registerRolloutRoutes(app: FastifyInstance, ctx: RouteContext): void {
  app.post('/v1/campaigns/:id/steps/:step/rollouts', ACCESS.campaignWrite, async (req, reply) => {
    const { id, step } = parseOr422(StepParams, req.params, 'path');
    const batch = parseOr422(RolloutBatch, req.body, 'rollout batch');
    const receivedAt = Date.now();
    // The campaign (404), its limits and the batch's acceptance: one transaction (entry/gateway/ingest.ts).
    const accepting = acceptBatch(ctx.db, id, step, batch, receivedAt);
    // The records are encoded while the transaction runs (unused if it finds a duplicate or refuses).
    let records: OutgoingRecord[] | undefined;
    if (ctx.publisher) {
      accepting.catch(() => {});
      records = await ctx.publisher
        .encodeGroups({ campaignId: id, step, ...batch, receivedAt })
        .catch(() => undefined);
    }
    const accepted = await accepting;
    const out = { workflowId: accepted.workflowId, groups: accepted.groups, close: accepted.close };
    // A new batch is published here; its ingestion workflow runs only when that fails.
    if (!accepted.duplicate && ctx.publisher && (await ctx.publisher.publish(accepted, records, req.log)))
      return reply.code(202).send({ ...out, duplicate: false, published: true });
    if (accepted.duplicate && accepted.published)
      return reply.code(200).send({ ...out, duplicate: true, published: true });
    const input: IngestionInput = { claimId: accepted.claimId, topic: ctx.rewardsTopic ?? REWARDS_TOPIC };
    // Started for every batch not yet published, duplicates included: a batch recorded by a
    // request whose publish and start failed gets its workflow on the retry (or from the
    // reconciler, entry/gateway/reconcile.ts); a workflow that exists is never started twice.
    let started = false;
    try {
      await ctx.temporal.workflow.start(ingestionWorkflow, {
        taskQueue: ctx.taskQueue,
        workflowId: accepted.workflowId,
        workflowIdReusePolicy: WorkflowIdReusePolicy.REJECT_DUPLICATE,
        args: [input],
      });
      started = true;
    } catch (e) {
      if (!(e instanceof WorkflowExecutionAlreadyStartedError)) {
        req.log.error({ err: e }, 'cannot start the ingestion workflow');
        throw new ProblemError(
          503,
          `batch ${batch.batchId} is recorded but its ingestion could not start: retry the same request`,
        );
      }
    }
    if (accepted.duplicate && !started)
      return reply.code(200).send({ ...out, duplicate: true, published: false });
    return reply.code(202).send({ ...out, duplicate: false, published: false });
  });
}
