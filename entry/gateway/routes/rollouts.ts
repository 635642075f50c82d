// Rollouts: a trainer posts a step's scored groups. The batch is accepted with its claim check
// in one transaction (entry/gateway/ingest.ts), then published to Kafka here, or by its ingestion
// workflow when that fails (entry/gateway/publish.ts); a retried batch is a duplicate, never counted twice.
import { WorkflowExecutionAlreadyStartedError, WorkflowIdReusePolicy } from '@temporalio/client';
import type { FastifyInstance } from 'fastify';
import type { OutgoingRecord } from '../../../platform/kafka/port.js';
import { REWARDS_TOPIC } from '../../../platform/kafka/topology.js';
import { loadCampaign } from '../../../platform/store/campaigns.js';
import { noteStepRefusal } from '../../../platform/store/steps/refusals.js';
import { type IngestionInput, ingestionWorkflow } from '../../../workflows/ingestion.js';
import { ACCESS } from '../access.js';
import { acceptBatch } from '../ingest.js';
import { ProblemError, parseOr422 } from '../problem.js';
import { ID_PATTERN, RolloutBatch, StepParams } from '../schemas.js';
import type { RouteContext } from './context.js';

export function registerRolloutRoutes(app: FastifyInstance, ctx: RouteContext): void {
  app.post('/v1/campaigns/:id/steps/:step/rollouts', ACCESS.campaignWrite, async (req, reply) => {
    const { id, step } = parseOr422(StepParams, req.params, 'path');
    const receivedAt = Date.now();
    let batch: RolloutBatch;
    let accepted: Awaited<ReturnType<typeof acceptBatch>>;
    let records: OutgoingRecord[] | undefined;
    try {
      batch = parseOr422(RolloutBatch, req.body, 'rollout batch');
      // The campaign (404), its limits and the batch's acceptance: one transaction (entry/gateway/ingest.ts).
      const accepting = acceptBatch(ctx.db, id, step, batch, receivedAt);
      // The records are encoded while the transaction runs (unused if it finds a duplicate or refuses).
      if (ctx.publisher) {
        accepting.catch(() => {});
        const b = batch;
        records = await ctx.publisher
          .encodeGroups({ campaignId: id, step, ...b, receivedAt })
          .catch(() => undefined);
      }
      accepted = await accepting;
    } catch (e) {
      await noteRefusedClosing(ctx, id, step, req.body, e);
      throw e;
    }
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

/**
 * A refused (422) closing batch leaves its step open for good unless the trainer sends another:
 * noted for the campaign (platform/store/steps/refusals.ts), so that the missing step and the
 * checkpoints waiting for it say why. A step outside the campaign's window is not one it waits for.
 */
async function noteRefusedClosing(
  ctx: RouteContext,
  campaignId: string,
  step: number,
  body: unknown,
  e: unknown,
) {
  if (!(e instanceof ProblemError) || e.status !== 422 || e.slug === 'step-out-of-window') return;
  const raw = (body ?? {}) as { close?: unknown; batchId?: unknown };
  if (raw.close !== true) return;
  try {
    if (!(await loadCampaign(ctx.db, campaignId))) return;
    await noteStepRefusal(ctx.db, campaignId, {
      step,
      batchId: typeof raw.batchId === 'string' && ID_PATTERN.test(raw.batchId) ? raw.batchId : null,
      problem: e.slug ?? 'validation',
      detail: e.message,
    });
  } catch {
    // The refusal is answered whatever happens to its note.
  }
}
