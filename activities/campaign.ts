// Activities of the campaign workflow: all of its I/O. Each is idempotent (deterministic event
// ids, idempotent appends, atomic file writes), so a retry after a crash has the effect of one.
import { Context } from '@temporalio/activity';
import type { Client } from '@temporalio/client';
import type pg from 'pg';
import {
  type CheckpointEvaluationSettings,
  checkpointEvaluationInput,
  type EvaluationInput,
} from '../domain/evaluation.js';
import { eventIds, streams, workflowIds } from '../domain/ids.js';
import { DEFAULT_CONFIG } from '../platform/config/campaign-config.js';
import { loadCampaign } from '../platform/store/campaigns.js';
import { inTransaction } from '../platform/store/db.js';
import { checkpointEventsAfter } from '../platform/store/events/checkpoints.js';
import { recordedEvaluations } from '../platform/store/events/evaluations.js';
import { type NewEvent, readStreamOf } from '../platform/store/events/event-store.js';
import { recordEvents, recordEventsIn } from '../platform/store/pool/projection.js';
import {
  describeMissingStep,
  type MissingStep,
  missingStep,
  passable,
  skipMissingStep,
} from '../platform/store/steps/missing-step.js';
import { lastClosedStep } from '../platform/store/steps/view.js';
import { WatermarkTimeout, waitForWatermark } from '../platform/store/steps/watermark.js';
import { loadTaskStats } from '../platform/store/task-stats/view.js';
import { type WorkflowEnd, workflowEnd } from '../platform/temporal/connect.js';
import type { EventName, EventPayloads, Stage, TaskStats } from '../schemas/types.generated.js';
import { workerEvent } from './events.js';
import type { ExecutorClient } from './executor-client.js';
import { DEFAULT_SINK_KEEP, deliverPoolJsonl } from './pool-sink.js';

export interface CampaignActivityDeps {
  pool: pg.Pool;
  executor: ExecutorClient;
  /** Folder of the JSONL sink (one sub-folder per campaign). */
  sinkDir: string;
  /** Version files kept per campaign (activities/pool-sink.ts); 0 keeps all. Default DEFAULT_SINK_KEEP. */
  sinkKeep?: number;
  /** Temporal, to see whether synthesis children have ended. */
  temporal: Client;
}

/** How often a step's wait looks whether the step is a missing one. */
const GAP_CHECK_MS = 2000;

/** The campaign's ingestion.missingSteps as its registry row holds it now (reconfigurations included). */
async function missingStepsPolicy(db: pg.Pool, campaignId: string) {
  return ((await loadCampaign(db, campaignId))?.config ?? DEFAULT_CONFIG).ingestion.missingSteps;
}

/** How a synthesis child ended without reporting (a closed workflow, or one Temporal no longer knows). */
export type SynthesisEnd = Exclude<WorkflowEnd, 'running'>;

/** What the campaign counts for an ended synthesis (the workflow's SynthesisOutcome). */
export interface SettledSynthesis {
  synthesisId: string;
  outcome: 'validated' | 'rejected';
  candidateId?: string;
  reasonCode?: string;
}

/** The reason code of a run that ended without recording an outcome. */
const END_REASON: Record<SynthesisEnd, string> = {
  failed: 'synthesis-workflow-failed',
  terminated: 'synthesis-terminated',
  'timed-out': 'synthesis-timed-out',
  cancelled: 'synthesis-cancelled',
  'not-found': 'synthesis-lost',
  completed: 'synthesis-no-outcome',
};

/** The stage a run was in when it ended, from its last completed stage. */
const STAGE_AFTER: Record<string, Stage> = {
  plan: 'execute',
  execute: 'rewrite',
  rewrite: 'critique',
  critique: 'critique',
  refine: 'critique',
  augment: 'augment',
};

/** An event as the workflow describes it: the activity adds the schema fingerprint. */
export interface WorkflowEvent {
  eventId: string;
  type: EventName;
  payload: Record<string, unknown>;
  metadata?: Record<string, unknown>;
}

// The workflow's lifecycle events come through Temporal as plain objects: their type names are
// checked (EventName), their payloads only when the relay encodes them to their schema.
function toNewEvents(events: WorkflowEvent[]): NewEvent[] {
  return events.map((e) => {
    const { eventId: _id, ...payload } = e.payload;
    return workerEvent(e.type, e.eventId, payload as Omit<EventPayloads[EventName], 'eventId'>, e.metadata);
  });
}

export function createCampaignActivities(deps: CampaignActivityDeps) {
  /**
   * The outcome of an ended synthesis: the one it recorded, else a CandidateRejected recorded now
   * (same event id as the run's own rejection, so a retry appends nothing twice). The run has
   * ended, so it cannot record an outcome concurrently.
   */
  const settle = (input: {
    campaignId: string;
    synthesisId: string;
    seedTaskId: string;
    ended: SynthesisEnd;
    reason: string;
  }): Promise<SettledSynthesis> =>
    inTransaction(deps.pool, async (c) => {
      const { synthesisId } = input;
      const stream = streams.synthesis(synthesisId);
      const rows = await readStreamOf(c, stream, [
        'CandidateValidated',
        'CandidateRejected',
        'StageCompleted',
        'StageFailed',
      ]);
      const outcome = rows.find((r) => r.type === 'CandidateValidated' || r.type === 'CandidateRejected');
      if (outcome?.type === 'CandidateValidated')
        return { synthesisId, outcome: 'validated', candidateId: outcome.payload.candidateId };
      if (outcome?.type === 'CandidateRejected')
        return { synthesisId, outcome: 'rejected', reasonCode: outcome.payload.reasonCode };
      // The stage it stopped in: one that failed (StageFailed), else the one after the last completed.
      const last = rows.at(-1);
      const reasonCode = END_REASON[input.ended];
      await recordEventsIn(c, stream, [
        workerEvent('CandidateRejected', eventIds.candidateRejected(synthesisId), {
          campaignId: input.campaignId,
          synthesisId,
          candidateId: null,
          seedTaskId: input.seedTaskId,
          stage:
            last?.type === 'StageFailed'
              ? last.payload.stage
              : (last?.type === 'StageCompleted' && STAGE_AFTER[last.payload.stage]) || 'plan',
          reasonCode,
          reason: `the synthesis workflow ended without an outcome (${input.ended}): ${input.reason}`.slice(
            0,
            2000,
          ),
          occurredAt: Date.now(),
        }),
      ]);
      return { synthesisId, outcome: 'rejected', reasonCode };
    });

  return {
    /** The outcome of a synthesis child that ended without reporting (failed, terminated, timed out, cancelled). */
    settleSynthesis(input: {
      campaignId: string;
      synthesisId: string;
      seedTaskId: string;
      ended: SynthesisEnd;
      reason: string;
    }): Promise<SettledSynthesis> {
      return settle(input);
    },

    /**
     * Watches synthesis workflows the campaign run holds no child handle for (started by an earlier
     * run): returns the outcomes of those that have ended as soon as one has, or [] after
     * `maxWaitMs`. Heartbeats while it waits.
     */
    async awaitSynthesesEnded(input: {
      campaignId: string;
      /** synthesisId -> seed task id */
      syntheses: Record<string, string>;
      pollMs?: number;
      maxWaitMs?: number;
    }): Promise<SettledSynthesis[]> {
      const ctx = Context.current();
      const deadline = Date.now() + (input.maxWaitMs ?? 5 * 60_000);
      for (;;) {
        const ended: SettledSynthesis[] = [];
        for (const [synthesisId, seedTaskId] of Object.entries(input.syntheses)) {
          const end = await workflowEnd(deps.temporal, workflowIds.synthesis(synthesisId));
          if (end === 'running') continue;
          const reason = end === 'not-found' ? 'Temporal does not know the workflow' : `workflow ${end}`;
          ended.push(
            await settle({ campaignId: input.campaignId, synthesisId, seedTaskId, ended: end, reason }),
          );
        }
        if (ended.length > 0 || Date.now() >= deadline) return ended;
        ctx.heartbeat();
        await ctx.sleep(input.pollMs ?? 2000);
      }
    },

    /**
     * The evaluations the campaign workflow is to start for its recorded checkpoints under
     * `settings` (its `evaluation` config): those that recorded nothing and whose workflow Temporal
     * does not know. Blocks (heartbeating, looking every `pollMs`) until there is one, unless `wait`
     * is false. A workflow that exists counts as started, whatever its state: it records the
     * evaluation, and a finished one is never run again.
     */
    async awaitCheckpointEvaluations(input: {
      campaignId: string;
      settings: CheckpointEvaluationSettings;
      wait?: boolean;
      pollMs?: number;
    }): Promise<EvaluationInput[]> {
      const ctx = Context.current();
      // Checkpoints read so far (by stream version) whose evaluation was not seen started yet.
      let after = 0;
      let pending: EvaluationInput[] = [];
      for (;;) {
        for (const e of await checkpointEventsAfter(deps.pool, input.campaignId, after)) {
          after = e.version;
          const c = e.payload;
          pending.push(
            checkpointEvaluationInput(
              input.campaignId,
              { checkpointId: c.checkpointId, trainerStep: Number(c.trainerStep), runId: c.runId },
              input.settings,
            ),
          );
        }
        const recorded = await recordedEvaluations(
          deps.pool,
          pending.map((p) => p.evaluationId),
        );
        const todo: EvaluationInput[] = [];
        for (const p of pending)
          if (
            !recorded.has(p.evaluationId) &&
            (await workflowEnd(deps.temporal, workflowIds.evaluation(p.evaluationId))) === 'not-found'
          )
            todo.push(p);
        if (todo.length > 0 || input.wait === false) return todo;
        pending = [];
        ctx.heartbeat({ checkpointsRead: after });
        await ctx.sleep(input.pollMs ?? 2000);
      }
    },

    /** Appends events to a stream and projects them in one transaction (no-op on retry). */
    async recordEvents(input: { streamId: string; events: WorkflowEvent[] }): Promise<{ appended: boolean }> {
      const r = await recordEvents(deps.pool, input.streamId, toNewEvents(input.events));
      return { appended: r.appended };
    },

    /**
     * Blocks (heartbeating) until every reward of steps <= step is in the statistics, or until
     * the step is passed over as missing (it never closed while later steps did) under the
     * campaign's ingestion.missingSteps policy, read afresh every few seconds so that a
     * reconfiguration reaches a wait already running. Returns the StepSkipped payload then.
     */
    async awaitStep(input: {
      campaignId: string;
      step: number;
    }): Promise<{ step: number; skipped?: Record<string, unknown> }> {
      const ctx = Context.current();
      const ac = new AbortController();
      ctx.cancelled.catch(() => ac.abort());
      let gap: MissingStep | null = null;
      const beat = setInterval(
        () =>
          ctx.heartbeat({ waitingFor: input.step, ...(gap ? { missing: describeMissingStep(gap) } : {}) }),
        2000,
      );
      try {
        for (;;) {
          try {
            await waitForWatermark(deps.pool, input.campaignId, input.step, {
              pollMs: 200,
              signal: ac.signal,
              timeoutMs: GAP_CHECK_MS,
            });
            return { step: input.step };
          } catch (e) {
            if (!(e instanceof WatermarkTimeout)) throw e;
          }
          gap = await missingStep(deps.pool, input.campaignId, input.step);
          if (!gap) continue;
          const policy = await missingStepsPolicy(deps.pool, input.campaignId);
          if (policy.policy !== 'move-on' || !passable(gap, policy.afterSteps)) continue;
          const skipped = await skipMissingStep(deps.pool, input.campaignId, input.step, policy.afterSteps);
          if (skipped) return { step: input.step, skipped };
        }
      } finally {
        clearInterval(beat);
      }
    },

    /** The latest step the aggregator has closed for the campaign (0 when none). */
    async lastClosedStep(input: { campaignId: string }): Promise<number> {
      return lastClosedStep(deps.pool, input.campaignId);
    },

    /** Statistics of the given tasks (only those observed). */
    async loadStats(input: { campaignId: string; taskIds?: string[] }): Promise<Record<string, TaskStats>> {
      return loadTaskStats(deps.pool, input.campaignId, input.taskIds);
    },

    /**
     * Writes the active pool of a version to the JSONL sink as BFCL task records (deliveredTask: a
     * BFCL id, the rods id as `rods_task_id`), atomically
     * (temp file + rename): `<sink>/<campaign>/pool-v<version>.jsonl` and `current.jsonl`.
     * Writing the same version twice gives the same file. Version files older than the newest
     * `sinkKeep` are removed afterwards (a crash before that leaves them for the next delivery).
     */
    async deliverPoolJsonl(input: {
      campaignId: string;
      version: number;
    }): Promise<{ file: string; tasks: number }> {
      return deliverPoolJsonl(
        deps.pool,
        deps.sinkDir,
        input.campaignId,
        input.version,
        deps.sinkKeep ?? DEFAULT_SINK_KEEP,
      );
    },
  };
}

export type CampaignActivities = ReturnType<typeof createCampaignActivities>;
