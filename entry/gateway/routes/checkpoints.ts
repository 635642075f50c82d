// Checkpoints: a trainer adapter reports each checkpoint save (rods_client's StepReporter, in step
// order after the step's report). The checkpoint is recorded once the campaign has closed every
// step up to it, with the Merkle root of its manifest (analysis/manifest/); before that the answer
// is a 503 the reporter retries, so a checkpoint never commits to a manifest missing a step.
import type { FastifyInstance } from 'fastify';
import { ManifestError, manifestSummaries } from '../../../analysis/manifest/manifest.js';
import { eventIds } from '../../../domain/ids.js';
import type { CheckpointRecord } from '../../../domain/manifest.js';
import {
  checkpointEvents,
  checkpointRecord,
  recordCheckpoint,
} from '../../../platform/store/events/checkpoints.js';
import { watermark } from '../../../platform/store/steps/watermark.js';
import { ACCESS } from '../access.js';
import { ProblemError, parseOr422, problem, sendProblem } from '../problem.js';
import { CampaignParams, CheckpointReport } from '../schemas.js';
import { type RouteContext, requireCampaign } from './context.js';

/** What identifies a report: a retry of the same report is a duplicate, anything else a conflict. */
const reportKey = (c: CheckpointRecord & { digest: string | null }) =>
  JSON.stringify([c.runId, c.trainerStep, c.resumedFrom, c.digest, c.retrainedSteps]);

export function registerCheckpointRoutes(app: FastifyInstance, ctx: RouteContext): void {
  app.post('/v1/campaigns/:id/checkpoints', ACCESS.campaignWrite, async (req, reply) => {
    const { id } = parseOr422(CampaignParams, req.params, 'path');
    const body = parseOr422(CheckpointReport, req.body, 'checkpoint report');
    await requireCampaign(ctx.db, id);
    const target: CheckpointRecord = {
      checkpointId: body.checkpointId,
      runId: body.runId,
      trainerStep: body.step,
      resumedFrom: body.resumedFrom ?? null,
      retrainedSteps: body.retrainedSteps.map((r) => ({
        step: r.step,
        tasks: r.groups.map((g) => ({ taskId: g.taskId, groups: 1, rollouts: g.rollouts })),
      })),
    };
    const digest = body.digest ?? null;
    const events = await checkpointEvents(ctx.db, id);
    const same = events.find((e) => e.payload.checkpointId === body.checkpointId);
    if (same) {
      const recorded = { ...checkpointRecord(same.payload), digest: same.payload.digest ?? null };
      if (reportKey(recorded) !== reportKey({ ...target, digest }))
        throw new ProblemError(
          409,
          `checkpoint ${body.checkpointId} of campaign ${id} is recorded with another report (run ${recorded.runId}, step ${recorded.trainerStep})`,
          undefined,
          'checkpoint-conflict',
        );
      return reply.code(200).send(answer(same.payload, true));
    }
    const w = await watermark(ctx.db, id, body.step);
    if (!w.reached) {
      const open = w.open.length
        ? `steps not yet closed: ${w.open
            .slice(0, 5)
            .map((o) => o.step)
            .join(', ')}`
        : `step ${body.step} not reported yet`;
      reply.header('Retry-After', '2');
      return sendProblem(
        reply,
        problem(
          503,
          `checkpoint ${body.checkpointId} is at step ${body.step}, which campaign ${id} has not closed yet (${open}): retry`,
          undefined,
          'checkpoint-ahead',
          { step: body.step },
        ),
      );
    }
    // One pass over the step records, holding per-task totals (not every step's tasks).
    const manifest = (
      await manifestSummaries(
        ctx.db,
        id,
        [target],
        events.map((e) => checkpointRecord(e.payload)),
      )
    ).get(target.checkpointId)!;
    if (manifest instanceof ManifestError)
      throw new ProblemError(
        422,
        manifest.message,
        undefined,
        /resumed from .* not recorded/.test(manifest.message) ? 'unknown-checkpoint' : 'invalid-checkpoint',
      );
    const payload = {
      eventId: eventIds.checkpointSaved(id, body.checkpointId),
      campaignId: id,
      checkpointId: body.checkpointId,
      runId: body.runId,
      trainerStep: body.step,
      resumedFrom: target.resumedFrom,
      digest,
      retrainedSteps: target.retrainedSteps.map((r) => ({
        step: r.step,
        taskId: r.tasks.map((t) => t.taskId),
        rollouts: r.tasks.map((t) => t.rollouts),
      })),
      manifestTasks: manifest.tasks,
      manifestGroups: manifest.groups,
      manifestRoot: manifest.root,
      occurredAt: Date.now(),
    };
    // Two concurrent reports of one checkpoint append one event (its id derives from the checkpoint).
    const appended = await recordCheckpoint(ctx.db, payload);
    req.log.info(
      { campaignId: id, checkpointId: body.checkpointId, step: body.step, tasks: payload.manifestTasks },
      'checkpoint recorded',
    );
    return reply.code(appended ? 201 : 200).send(answer(payload, !appended));
  });
}

function answer(
  p: { checkpointId: string; manifestRoot: string; manifestTasks: number; manifestGroups: number | bigint },
  duplicate: boolean,
) {
  return {
    checkpointId: p.checkpointId,
    manifestRoot: p.manifestRoot,
    tasks: p.manifestTasks,
    groups: Number(p.manifestGroups),
    duplicate,
  };
}
