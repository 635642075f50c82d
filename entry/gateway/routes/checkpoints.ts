// Checkpoints: a trainer adapter reports each checkpoint save (rods_client's StepReporter, after
// the reports of the steps up to it). The checkpoint is recorded once the campaign has closed
// every step up to it (a skipped step counts as closed), with the Merkle root of its manifest
// (analysis/manifest/); before that the answer is a 503 naming the step it waits for and why, and
// the wait is kept for `rods campaign status`. A request reads its checkpoint's row and its chain's
// (platform/store/checkpoints/), never the campaign's whole checkpoints stream; manifests are
// computed a few at a time per gateway and one at a time per campaign (entry/gateway/manifest-queue.ts).
import type { FastifyInstance, FastifyReply } from 'fastify';
import { type SummaryTarget, summarize } from '../../../analysis/manifest/manifest.js';
import { eventIds } from '../../../domain/ids.js';
import {
  type CheckpointRecord,
  type CheckpointReportKey,
  ManifestError,
  reportDifference,
  reportHash,
  type StepTask,
  trainingChain,
} from '../../../domain/manifest.js';
import {
  type CheckpointRow,
  chainOf,
  findCheckpoint,
  recordCheckpoint,
  retrainedInSegment,
  retrainedOf,
  setReportHash,
  withCheckpointLock,
} from '../../../platform/store/checkpoints/records.js';
import { isWaiting, noteCheckpointWait } from '../../../platform/store/checkpoints/waits.js';
import type { Queryable } from '../../../platform/store/events/event-store.js';
import { describeMissingStep, missingStep } from '../../../platform/store/steps/missing-step.js';
import { describeRefusal, stepRefusal } from '../../../platform/store/steps/refusals.js';
import { closedThrough } from '../../../platform/store/steps/watermark.js';
import { ACCESS } from '../access.js';
import { ManifestBusy } from '../manifest-queue.js';
import { ProblemError, parseOr422, problem, sendProblem } from '../problem.js';
import { CampaignParams, CheckpointReport } from '../schemas.js';
import { type RouteContext, requireCampaign } from './context.js';

/** What CheckpointSaved can encode of a manifest's counts (manifestTasks is an Avro int). */
const MAX_MANIFEST_TASKS = 2 ** 31 - 1;

export function registerCheckpointRoutes(app: FastifyInstance, ctx: RouteContext): void {
  app.post('/v1/campaigns/:id/checkpoints', ACCESS.campaignWrite, async (req, reply) => {
    const { id } = parseOr422(CampaignParams, req.params, 'path');
    const body = parseOr422(CheckpointReport, req.body, 'checkpoint report');
    await requireCampaign(ctx.db, id);
    const report: CheckpointReportKey = {
      checkpointId: body.checkpointId,
      runId: body.runId,
      trainerStep: body.step,
      resumedFrom: body.resumedFrom ?? null,
      digest: body.digest ?? null,
      retrainedSteps: body.retrainedSteps.map((r) => ({
        step: r.step,
        tasks: r.groups.map((g): StepTask => ({ taskId: g.taskId, groups: 1, rollouts: g.rollouts })),
      })),
    };
    const hash = reportHash(report);

    // A report of a recorded id: the recorded receipt, or a 409 naming what differs.
    const recorded = await findCheckpoint(ctx.db, id, report.checkpointId);
    if (recorded) return receipt(ctx.db, reply, id, recorded, report, hash);

    // The checkpoint it resumed from must be recorded first (or wait with it).
    let parent: CheckpointRow | null = null;
    if (report.resumedFrom !== null) {
      parent = await findCheckpoint(ctx.db, id, report.resumedFrom);
      if (!parent) {
        if (await isWaiting(ctx.db, id, report.resumedFrom))
          return wait(
            ctx,
            reply,
            id,
            report,
            null,
            `it resumed from checkpoint ${report.resumedFrom}, which waits itself`,
          );
        throw new ProblemError(
          422,
          `checkpoint ${report.checkpointId} resumed from ${report.resumedFrom}, which campaign ${id} has not recorded`,
          [{ field: 'resumedFrom', message: 'not a recorded checkpoint of the campaign' }],
          'unknown-checkpoint',
        );
      }
      const invalid = againstParent(report, parent);
      if (invalid)
        throw new ProblemError(
          422,
          `invalid checkpoint report: ${invalid.message}`,
          [invalid],
          'invalid-checkpoint',
        );
    }

    // Every step up to the checkpoint's closed, gaps included; else a 503 naming the wait.
    const closed = await closedThrough(ctx.db, id, report.trainerStep);
    if (!closed.reached) {
      const w = closed.waitsFor!;
      return wait(ctx, reply, id, report, w.step, await whyOpen(ctx, id, w));
    }

    let outcome: { row: CheckpointRow } | { payload: ReturnType<typeof savedPayload> };
    try {
      outcome = await ctx.manifests.run(id, () =>
        withCheckpointLock(ctx.db, id, async (locked) => {
          // Recorded meanwhile by a concurrent report of the same id (here or in another gateway).
          const again = await findCheckpoint(locked, id, report.checkpointId);
          if (again) return { row: again };
          const summary = await chainSummary(locked, id, report, parent);
          const payload = savedPayload(id, report, summary);
          await recordCheckpoint(locked, payload, report, hash);
          return { payload };
        }),
      );
    } catch (e) {
      if (e instanceof ManifestError) throw new ProblemError(422, e.message, undefined, 'invalid-checkpoint');
      if (e instanceof ManifestBusy) {
        reply.header('Retry-After', '5');
        return sendProblem(reply, problem(503, `${e.message}: retry`, undefined, 'checkpoint-busy'));
      }
      throw e;
    }
    if ('row' in outcome) return receipt(ctx.db, reply, id, outcome.row, report, hash);
    const p = outcome.payload;
    req.log.info(
      { campaignId: id, checkpointId: p.checkpointId, step: p.trainerStep, tasks: p.manifestTasks },
      'checkpoint recorded',
    );
    return reply.code(201).send({
      checkpointId: p.checkpointId,
      manifestRoot: p.manifestRoot,
      tasks: p.manifestTasks,
      groups: p.manifestGroups,
      duplicate: false,
    });
  });
}

/** A retrained step must be one this run trained after the checkpoint it resumed from. */
function againstParent(
  report: CheckpointRecord,
  parent: CheckpointRow,
): { field: string; message: string } | null {
  if (parent.trainerStep > report.trainerStep)
    return {
      field: 'step',
      message: `the checkpoint's step ${report.trainerStep} is before step ${parent.trainerStep} of the checkpoint it resumed from (${parent.checkpointId})`,
    };
  const i = report.retrainedSteps.findIndex((r) => r.step <= parent.trainerStep);
  if (i >= 0)
    return {
      field: `retrainedSteps[${i}].step`,
      message: `step ${report.retrainedSteps[i]!.step} is not after step ${parent.trainerStep} of the checkpoint the run resumed from (${parent.checkpointId}): the run did not train it`,
    };
  return null;
}

/** The recorded receipt (200 duplicate) for the same report, a 409 naming the difference for another. */
async function receipt(
  db: Queryable,
  reply: FastifyReply,
  campaignId: string,
  row: CheckpointRow,
  sent: CheckpointReportKey,
  hash: string,
) {
  let recordedHash = row.reportHash;
  const recordedReport = async (): Promise<CheckpointReportKey> => ({
    checkpointId: row.checkpointId,
    runId: row.runId,
    trainerStep: row.trainerStep,
    resumedFrom: row.resumedFrom,
    digest: row.digest,
    retrainedSteps: await retrainedOf(db, campaignId, row.checkpointId),
  });
  if (recordedHash === null) {
    // A row copied from an event recorded before the rows existed: hashed once, kept.
    recordedHash = reportHash(await recordedReport());
    await setReportHash(db, campaignId, row.checkpointId, recordedHash);
  }
  if (recordedHash !== hash) {
    const scalars = { ...sent, retrainedSteps: [] };
    const recordedScalars = { ...row, retrainedSteps: [] };
    const difference =
      reportDifference(recordedScalars, scalars) ??
      reportDifference(await recordedReport(), sent) ??
      'the report';
    throw new ProblemError(
      409,
      `checkpoint ${row.checkpointId} of campaign ${campaignId} is recorded with another report: ${difference}`,
      undefined,
      'checkpoint-conflict',
      { recordedRoot: row.manifestRoot, recordedStep: row.trainerStep, recordedRunId: row.runId },
    );
  }
  return reply.code(200).send({
    checkpointId: row.checkpointId,
    manifestRoot: row.manifestRoot,
    tasks: row.manifestTasks,
    groups: row.manifestGroups,
    duplicate: true,
  });
}

/** Why the step holds the campaign's watermark: refused, missing, never reported or still counting. */
async function whyOpen(
  ctx: RouteContext,
  campaignId: string,
  w: { step: number; reported: boolean; declared: number | null; accounted: number },
): Promise<string> {
  const gap = await missingStep(ctx.db, campaignId, w.step);
  if (gap) return describeMissingStep(gap);
  const refusal = await stepRefusal(ctx.db, campaignId, w.step);
  if (refusal) return `step ${w.step} is not closed: ${describeRefusal(refusal)}`;
  if (!w.reported) return `step ${w.step} has not been reported yet`;
  return `step ${w.step} is not closed yet (${w.accounted} of ${w.declared ?? 'an unknown number of'} groups counted)`;
}

/** 503 checkpoint-ahead naming the wait, kept for `rods campaign status`. */
async function wait(
  ctx: RouteContext,
  reply: FastifyReply,
  campaignId: string,
  report: CheckpointRecord,
  step: number | null,
  why: string,
) {
  await noteCheckpointWait(ctx.db, campaignId, {
    checkpointId: report.checkpointId,
    trainerStep: report.trainerStep,
    waitsForStep: step,
    reason: why,
  });
  reply.header('Retry-After', '2');
  return sendProblem(
    reply,
    problem(
      503,
      `checkpoint ${report.checkpointId} (step ${report.trainerStep}) waits: ${why}; retry`,
      undefined,
      'checkpoint-ahead',
      { step: report.trainerStep, waitsForStep: step, reason: why },
    ),
  );
}

/**
 * The checkpoint's manifest summary from its chain's rows: the runs behind it (the recorded
 * checkpoints it resumes from), what each run trained again within its part of the chain, and one
 * pass over the campaign's step records up to the checkpoint's step.
 */
async function chainSummary(
  db: Queryable,
  campaignId: string,
  report: CheckpointRecord,
  parent: CheckpointRow | null,
) {
  const rows = parent ? await chainOf(db, campaignId, parent.checkpointId) : [];
  const byId = new Map<string, CheckpointRecord>(
    rows.map((r) => [
      r.checkpointId,
      {
        checkpointId: r.checkpointId,
        runId: r.runId,
        trainerStep: r.trainerStep,
        resumedFrom: r.resumedFrom,
        retrainedSteps: [],
      },
    ]),
  );
  const chain = trainingChain(report, byId);
  const swap = new Map<number, StepTask[]>();
  for (const seg of chain) {
    // Recorded before this one, first by record order; then this report's own (recorded last).
    for (const [step, tasks] of await retrainedInSegment(db, campaignId, seg.runId, seg.from, seg.to))
      swap.set(step, tasks);
    if (seg.runId === report.runId && report.trainerStep <= seg.to)
      for (const r of report.retrainedSteps)
        if (r.step > seg.from && r.step <= seg.to && !swap.has(r.step)) swap.set(r.step, r.tasks);
  }
  const target: SummaryTarget = { checkpointId: report.checkpointId, trainerStep: report.trainerStep, swap };
  const summary = (await summarize(db, campaignId, [target])).get(report.checkpointId)!;
  if (summary instanceof ManifestError) throw summary;
  if (summary.tasks > MAX_MANIFEST_TASKS || !Number.isSafeInteger(summary.groups))
    throw new ManifestError(
      `the manifest of checkpoint ${report.checkpointId} has ${summary.tasks} tasks and ${summary.groups} groups, more than a CheckpointSaved can hold`,
    );
  return summary;
}

function savedPayload(
  campaignId: string,
  report: CheckpointReportKey,
  summary: { root: string; tasks: number; groups: number },
) {
  return {
    eventId: eventIds.checkpointSaved(campaignId, report.checkpointId),
    campaignId,
    checkpointId: report.checkpointId,
    runId: report.runId,
    trainerStep: report.trainerStep,
    resumedFrom: report.resumedFrom,
    digest: report.digest,
    retrainedSteps: report.retrainedSteps.map((r) => ({
      step: r.step,
      taskId: r.tasks.map((t) => t.taskId),
      rollouts: r.tasks.map((t) => t.rollouts),
    })),
    manifestTasks: summary.tasks,
    manifestGroups: summary.groups,
    manifestRoot: summary.root,
    occurredAt: Date.now(),
  };
}
