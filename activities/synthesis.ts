// Activities of the synthesis workflow: the LLM stages (activities/llm), the environment
// executor, the deterministic gates and the outcome. Every stage that succeeds records a
// StageCompleted event (model, prompt version hash, output hash) in the synthesis' stream; the
// outcome is CandidateValidated or CandidateRejected. Event ids derive from the synthesis id,
// the stage and the attempt, so a retried activity appends nothing twice.
import { createHash } from 'node:crypto';
import { ApplicationFailure, Context } from '@temporalio/activity';
import type pg from 'pg';
import { BFCL_CATALOG } from '../domain/bfcl-catalog.js';
import { parseCampaignConfig } from '../domain/campaign-config.js';
import { candidateHash, checkCandidate, gateLimits } from '../domain/candidate.js';
import { eventIds, streams } from '../domain/ids.js';
import { inTransaction } from '../store/db.js';
import type { NewEvent } from '../store/event-store.js';
import { recordEventsIn } from '../store/pool-projection.js';
import { workerEvent } from './events.js';
import {
  type ExecuteResponse,
  type ExecutorClient,
  ExecutorError,
  type Failure,
  type TaskRecord,
} from './executor-client.js';
import { type GeneratorConfig, generatorConfig } from './llm/config.js';
import { GeneratorOutputError, GeneratorRequestError, GeneratorUnavailableError } from './llm/errors.js';
import type { Candidate, Judgement, Plan } from './llm/schemas.js';
import * as stages from './llm/stages.js';

export interface SynthesisActivityDeps {
  pool: pg.Pool;
  executor: ExecutorClient;
  now?: () => number;
  /** Extra generator settings (e.g. headers for the stand-in's fault injection in tests). */
  generatorOverrides?: Record<string, unknown>;
}

/** Identifies a stage run for StageCompleted. */
export interface StageRef {
  campaignId: string;
  synthesisId: string;
  attempt: number;
  config: unknown;
}

const TOOL_CATALOG: Record<string, string[]> = Object.fromEntries(
  Object.entries(BFCL_CATALOG).map(([cls, methods]) => [cls, Object.keys(methods)]),
);

function sha256(text: string): string {
  return createHash('sha256').update(text).digest('hex');
}

const ev = workerEvent;

/** Turns generator errors into Temporal failures: schema failures are not retried. */
function asFailure(e: unknown): never {
  if (e instanceof GeneratorOutputError) {
    throw ApplicationFailure.create({
      type: 'GeneratorOutputError',
      message: e.message,
      nonRetryable: true,
      details: [{ raw: e.attempts?.map((a) => a.raw) ?? [] }],
    });
  }
  if (e instanceof GeneratorRequestError) {
    throw ApplicationFailure.create({
      type: 'GeneratorRequestError',
      message: e.message,
      nonRetryable: true,
    });
  }
  if (e instanceof GeneratorUnavailableError) {
    throw ApplicationFailure.create({ type: 'GeneratorUnavailableError', message: e.message });
  }
  if (e instanceof ExecutorError) {
    if (e.code !== 'config' && !e.retryable) {
      // The executor refused this request (malformed, or its output over a limit): the same
      // request fails the same way on every retry.
      throw ApplicationFailure.create({
        type: 'ExecutorRequestRefused',
        message: e.message,
        nonRetryable: true,
        details: [{ status: e.status, limit: e.limit ?? null }],
      });
    }
    throw ApplicationFailure.create({
      type: 'ExecutorUnavailable',
      message: e.message,
      nonRetryable: e.code === 'config',
      // a busy executor says when to come back (Retry-After)
      ...(e.retryAfterMs !== undefined ? { nextRetryDelay: e.retryAfterMs } : {}),
    });
  }
  throw e;
}

export function createSynthesisActivities(deps: SynthesisActivityDeps) {
  const now = deps.now ?? Date.now;

  const genCfg = (config: unknown): GeneratorConfig => {
    const c = parseCampaignConfig(config).generator as Record<string, unknown>;
    return generatorConfig({ ...c, ...(deps.generatorOverrides ?? {}) } as never);
  };

  const record = async (streamId: string, events: NewEvent[]) => {
    await inTransaction(deps.pool, (c) => recordEventsIn(c, streamId, events));
  };

  /** Runs one LLM stage with heartbeats and records its StageCompleted. */
  const llm = async <T>(
    ref: StageRef,
    run: (cfg: GeneratorConfig, opts: stages.StageOptions) => Promise<stages.StageResult<T>>,
  ) => {
    const ctx = Context.current();
    const cfg = genCfg(ref.config);
    let r: stages.StageResult<T>;
    try {
      r = await run(cfg, { heartbeat: () => ctx.heartbeat(), signal: ctx.cancellationSignal });
    } catch (e) {
      asFailure(e);
    }
    await record(streams.synthesis(ref.synthesisId), [
      ev('StageCompleted', eventIds.stageCompleted(ref.synthesisId, r.prompt, ref.attempt), {
        campaignId: ref.campaignId,
        synthesisId: ref.synthesisId,
        stage: r.stage,
        attempt: ref.attempt,
        model: r.model,
        promptVersionHash: r.promptHash,
        outputHash: r.outputHash,
        occurredAt: now(),
      }),
    ]);
    return { value: r.value, model: r.model, promptHash: r.promptHash, outputHash: r.outputHash };
  };

  return {
    async synthesisStarted(input: {
      campaignId: string;
      synthesisId: string;
      seedTaskId: string;
      selectionEventId: string;
      config: unknown;
    }): Promise<void> {
      await record(streams.synthesis(input.synthesisId), [
        ev('SynthesisStarted', eventIds.synthesisStarted(input.synthesisId), {
          campaignId: input.campaignId,
          synthesisId: input.synthesisId,
          seedTaskId: input.seedTaskId,
          selectionEventId: input.selectionEventId,
          generatorModel: genCfg(input.config).model,
          occurredAt: now(),
        }),
      ]);
    },

    planTask(input: StageRef & { seed: TaskRecord; blocklist: string[] }) {
      const limits = parseCampaignConfig(input.config).synthesis;
      return llm<Plan>(input, (cfg, opts) =>
        stages.plan(
          input.seed,
          {
            blocklist: input.blocklist,
            limits: {
              minTurns: limits.turns.min,
              maxTurns: limits.turns.max,
              minCallsPerTurn: limits.callsPerTurn.min,
              maxCallsPerTurn: limits.callsPerTurn.max,
            },
          },
          cfg,
          opts,
        ),
      );
    },

    /** The parameter stage: returns the draft candidate (empty questions until the rewrite). */
    async generateCandidate(input: StageRef & { plan: Plan; seed: TaskRecord; candidateId: string }) {
      const r = await llm(input, (cfg, opts) => stages.generateCalls(input.plan, input.seed, cfg, opts));
      return { ...r, candidate: stages.draftCandidate(input.seed, r.value, { id: input.candidateId }) };
    },

    async patchConfig(input: StageRef & { candidate: Candidate; failure: Failure; repair: number }) {
      const r = await llm(input, (cfg, opts) =>
        stages.patchConfig(input.candidate, input.failure, cfg, { ...opts, repair: input.repair }),
      );
      return { ...r, candidate: { ...input.candidate, initial_config: r.value.initial_config } as Candidate };
    },

    async rewriteCandidate(input: StageRef & { candidate: Candidate; narrative?: string; seed: TaskRecord }) {
      const r = await llm(input, (cfg, opts) =>
        stages.rewrite(input.candidate, cfg, { ...opts, narrative: input.narrative, seedTask: input.seed }),
      );
      return { ...r, candidate: stages.withQuestion(input.candidate, r.value) };
    },

    judgeCandidate(input: StageRef & { candidate: Candidate; execution?: unknown }) {
      return llm<Judgement>(input, (cfg, opts) =>
        stages.judge(
          input.candidate,
          { ...cfg, model: cfg.judgeModel },
          { ...opts, execution: input.execution },
        ),
      );
    },

    async refineCandidate(input: StageRef & { candidate: Candidate; judgement: Judgement }) {
      const r = await llm(input, (cfg, opts) => stages.refine(input.candidate, input.judgement, cfg, opts));
      return { ...r, candidate: { ...r.value.candidate, id: input.candidate.id } as Candidate };
    },

    /** Runs the candidate's ground truth in fresh environment instances (Execute, and the Critique's re-execution). */
    async executeCandidate(input: {
      candidate: Candidate;
    }): Promise<{ ok: boolean; failure: Failure | null; statesHash: string }> {
      let r: ExecuteResponse;
      try {
        r = await deps.executor.execute({
          involved_classes: input.candidate.involved_classes,
          initial_config: input.candidate.initial_config,
          ground_truth: input.candidate.ground_truth,
          long_context: input.candidate.category === 'long_context',
        });
      } catch (e) {
        asFailure(e);
      }
      return {
        ok: r.ok,
        failure: r.failure ?? null,
        statesHash: sha256(JSON.stringify(r.turns.map((t) => t.state))),
      };
    },

    /** The deterministic gates of the Critique stage (domain/candidate.ts). */
    async gateCandidate(input: { candidate: Candidate; config: unknown }) {
      const g = checkCandidate(input.candidate, TOOL_CATALOG, gateLimits(parseCampaignConfig(input.config)));
      return g.ok ? { ok: true as const } : { ok: false as const, code: g.code, reason: g.reason };
    },

    /** StageCompleted for a stage without a model (execute, critique, augment). */
    async stageCompleted(
      input: StageRef & { stage: 'execute' | 'critique' | 'augment'; output: unknown },
    ): Promise<void> {
      await record(streams.synthesis(input.synthesisId), [
        ev('StageCompleted', eventIds.stageCompleted(input.synthesisId, input.stage, input.attempt), {
          campaignId: input.campaignId,
          synthesisId: input.synthesisId,
          stage: input.stage,
          attempt: input.attempt,
          model: null,
          promptVersionHash: null,
          outputHash: sha256(JSON.stringify(input.output)),
          occurredAt: now(),
        }),
      ]);
    },

    /**
     * Records the outcome. A validated candidate whose canonical content hash is already known for
     * the campaign is rejected as an exact duplicate instead.
     */
    async recordOutcome(
      input:
        | {
            kind: 'validated';
            campaignId: string;
            synthesisId: string;
            seedTaskId: string;
            candidate: Candidate;
            judge: { model: string; scores: Record<string, number>; reasons: string[] };
            refined: boolean;
            lineage: Record<string, unknown>;
          }
        | {
            kind: 'rejected';
            campaignId: string;
            synthesisId: string;
            seedTaskId: string;
            candidateId: string | null;
            stage: 'plan' | 'execute' | 'rewrite' | 'critique' | 'refine' | 'augment';
            reasonCode: string;
            reason: string;
            raw?: unknown;
          },
    ): Promise<{ outcome: 'validated' | 'rejected'; reasonCode?: string; candidateId?: string }> {
      const stream = streams.synthesis(input.synthesisId);
      return inTransaction(deps.pool, async (c) => {
        if (input.kind === 'rejected') {
          await recordEventsIn(c, stream, [
            ev(
              'CandidateRejected',
              eventIds.candidateRejected(input.synthesisId),
              {
                campaignId: input.campaignId,
                synthesisId: input.synthesisId,
                candidateId: input.candidateId,
                seedTaskId: input.seedTaskId,
                stage: input.stage,
                reasonCode: input.reasonCode,
                reason: input.reason.slice(0, 2000),
                occurredAt: now(),
              },
              input.raw !== undefined ? { raw: input.raw } : {},
            ),
          ]);
          return { outcome: 'rejected', reasonCode: input.reasonCode };
        }
        const hash = candidateHash(input.candidate);
        await c.query('select pg_advisory_xact_lock(hashtextextended($1, 0))', [
          `rods-candidates:${input.campaignId}`,
        ]);
        const dup = await c.query<{ candidate_id: string }>(
          'select candidate_id from candidates where campaign_id = $1 and candidate_hash = $2 and candidate_id <> $3',
          [input.campaignId, hash, input.candidate.id],
        );
        if (dup.rows[0]) {
          await recordEventsIn(c, stream, [
            ev('CandidateRejected', eventIds.candidateRejected(input.synthesisId), {
              campaignId: input.campaignId,
              synthesisId: input.synthesisId,
              candidateId: input.candidate.id,
              seedTaskId: input.seedTaskId,
              stage: 'critique',
              reasonCode: 'duplicate-candidate',
              reason: `exact duplicate (content hash ${hash.slice(0, 16)}) of candidate ${dup.rows[0].candidate_id}`,
              occurredAt: now(),
            }),
          ]);
          return { outcome: 'rejected', reasonCode: 'duplicate-candidate' };
        }
        await recordEventsIn(c, stream, [
          ev(
            'CandidateValidated',
            eventIds.candidateValidated(input.synthesisId),
            {
              campaignId: input.campaignId,
              synthesisId: input.synthesisId,
              candidateId: input.candidate.id,
              seedTaskId: input.seedTaskId,
              category: input.candidate.category,
              candidate: JSON.stringify(input.candidate),
              candidateHash: hash,
              judgeModel: input.judge.model,
              judgeScores: input.judge.scores,
              refined: input.refined,
              occurredAt: now(),
            },
            { lineage: { ...input.lineage, judgeReasons: input.judge.reasons } },
          ),
        ]);
        return { outcome: 'validated', candidateId: input.candidate.id };
      });
    },
  };
}

export type SynthesisActivities = ReturnType<typeof createSynthesisActivities>;
