// Activities of the synthesis workflow: the LLM stages (activities/llm), the environment
// executor, the deterministic gates and the outcome. Every stage that succeeds records a
// StageCompleted event (model, prompt version hash, output hash) in the synthesis' stream, a model
// stage whose every answer was refused a StageFailed (with its tokens); the outcome is
// CandidateValidated or CandidateRejected. Event ids derive from the synthesis id,
// the stage and the attempt, so a retried activity appends nothing twice.
import { createHash } from 'node:crypto';
import { ApplicationFailure, Context } from '@temporalio/activity';
import type pg from 'pg';
import promClient, { type Registry } from 'prom-client';
import { buildVariant, type VariantKind } from '../domain/augment.js';
import { BFCL_CATALOG } from '../domain/bfcl-catalog.js';
import { candidateHash, checkCandidate, gateLimits } from '../domain/candidate.js';
import { contaminationReason, fingerprint, nearestEvalTask } from '../domain/contamination.js';
import { eventIds, streams } from '../domain/ids.js';
import { settleVerdict } from '../domain/judge-rule.js';
import { nearestTask, taskFeatures } from '../domain/near-duplicate.js';
import { callsPerTurnCap, structuralCategory, structureMismatch } from '../domain/structure.js';
import type { TaskRecord } from '../domain/task.js';
import { campaignConfigOf, DEFAULT_CONFIG } from '../platform/config/campaign-config.js';
import { EVENT_STAGE, type PromptName } from '../platform/config/prompts.js';
import { loadCampaign } from '../platform/store/campaigns.js';
import { inTransaction } from '../platform/store/db.js';
import type { NewEvent } from '../platform/store/events/event-store.js';
import { candidateWithHash } from '../platform/store/pool/candidates.js';
import { recordEventsIn } from '../platform/store/pool/projection.js';
import type { Stage, StageCompleted } from '../schemas/types.generated.js';
import { evaluationSet } from './eval-set.js';
import { workerEvent } from './events.js';
import { type ExecuteResponse, type ExecutorClient, ExecutorError, type Failure } from './executor-client.js';
import { knownTasks } from './known-tasks.js';
import type { GeneratorConfig } from './llm/config.js';
import {
  type GeneratorEndpoints,
  loadGeneratorEndpoints,
  resolveGeneratorConfig,
  UnknownEndpointError,
} from './llm/endpoints.js';
import { GeneratorOutputError, GeneratorRequestError, GeneratorUnavailableError } from './llm/errors.js';
import { executionSummary } from './llm/execution-summary.js';
import { augmentChoice, type Candidate, type Judgement, type Plan } from './llm/schemas.js';
import * as stages from './llm/stages.js';

export interface SynthesisActivityDeps {
  pool: pg.Pool;
  executor: ExecutorClient;
  now?: () => number;
  /** The operator's generator endpoints (default: loadGeneratorEndpoints() of the environment). */
  endpoints?: GeneratorEndpoints;
  /** Where the generator's tokens are counted (rods_generator_tokens_total{stage, kind}). */
  metrics?: Registry;
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

/**
 * The sampling seed of a stage call: the same for a retry of the same call (its answer does not
 * change under a retry), different for every synthesis run and attempt, so two syntheses from one
 * seed task sample differently, as they would from a sampling LLM (vLLM honours `seed`).
 */
export function samplingSeed(ref: Pick<StageRef, 'synthesisId' | 'attempt'>): number {
  return createHash('sha256').update(`${ref.synthesisId}:${ref.attempt}`).digest().readUInt32BE(0) >>> 1;
}

/** The executor's request for a candidate's ground truth. */
function executeRequest(c: Candidate) {
  return {
    involved_classes: c.involved_classes,
    initial_config: c.initial_config,
    ground_truth: c.ground_truth,
    long_context: c.category === 'long_context',
  };
}

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

type RejectionStage = 'plan' | 'execute' | 'rewrite' | 'critique' | 'refine' | 'augment';

export function createSynthesisActivities(deps: SynthesisActivityDeps) {
  const now = deps.now ?? Date.now;
  /** The evaluation task a candidate copies (domain/contamination.ts), under its campaign's rule. */
  const evalContamination = async (campaignId: string, candidate: Candidate) => {
    const campaign = await loadCampaign(deps.pool, campaignId);
    const cfg = campaign?.config ?? DEFAULT_CONFIG;
    const rule = cfg.synthesis.contamination;
    if (!rule.enabled) return undefined;
    let evalSet: Awaited<ReturnType<typeof evaluationSet>>;
    try {
      evalSet = await evaluationSet(deps.executor, cfg.seeds?.perCategory ?? 100, rule.ngram);
    } catch (e) {
      asFailure(e);
    }
    const match = nearestEvalTask(fingerprint(candidate, rule.ngram), evalSet, rule);
    return match?.contaminated ? { match, rule } : undefined;
  };
  const tokenCounter =
    deps.metrics &&
    new promClient.Counter({
      name: 'rods_generator_tokens_total',
      help: "generator tokens of the synthesis stages' requests (the OpenAI usage field), by stage and kind (prompt, completion)",
      labelNames: ['stage', 'kind'],
      registers: [deps.metrics],
    });
  const generatorTokens = (
    stage: string,
    usage: { promptTokens: number; completionTokens: number } | null,
  ) => {
    if (!tokenCounter || !usage) return;
    tokenCounter.inc({ stage, kind: 'prompt' }, usage.promptTokens);
    tokenCounter.inc({ stage, kind: 'completion' }, usage.completionTokens);
  };

  const endpoints = deps.endpoints ?? loadGeneratorEndpoints();
  // The endpoint name is resolved here, at call time: Temporal payloads carry only the name.
  // An unknown name fails the same way on every retry, so it is not retried.
  const genCfg = (config: unknown): GeneratorConfig => {
    const c = campaignConfigOf(config).generator as Record<string, unknown>;
    try {
      return resolveGeneratorConfig(c, endpoints);
    } catch (e) {
      if (e instanceof UnknownEndpointError)
        throw ApplicationFailure.create({
          type: 'GeneratorRequestError',
          message: e.message,
          nonRetryable: true,
        });
      throw e;
    }
  };

  const record = async (streamId: string, events: NewEvent[]) => {
    await inTransaction(deps.pool, (c) => recordEventsIn(c, streamId, events));
  };

  /** Records a stage's StageCompleted; `idPart` names the stage in its event id (an LLM stage: its prompt). */
  const recordStage = (
    ref: StageRef,
    idPart: string,
    what: Pick<StageCompleted, 'stage' | 'model' | 'promptVersionHash' | 'outputHash'> &
      Partial<Pick<StageCompleted, 'promptTokens' | 'completionTokens'>>,
  ) =>
    record(streams.synthesis(ref.synthesisId), [
      ev('StageCompleted', eventIds.stageCompleted(ref.synthesisId, idPart, ref.attempt), {
        campaignId: ref.campaignId,
        synthesisId: ref.synthesisId,
        attempt: ref.attempt,
        promptTokens: null,
        completionTokens: null,
        ...what,
        occurredAt: now(),
      }),
    ]);

  /**
   * Records a model stage whose every answer was refused, with the error's message and what the
   * refused answers cost (the cost ledger's only record of them). Its id is the stage run's, so a
   * retry that fails the same way appends nothing twice.
   */
  const recordStageFailed = (ref: StageRef, e: GeneratorOutputError, stage: Stage) =>
    record(streams.synthesis(ref.synthesisId), [
      ev('StageFailed', eventIds.stageFailed(ref.synthesisId, e.stage, ref.attempt), {
        campaignId: ref.campaignId,
        synthesisId: ref.synthesisId,
        stage,
        attempt: ref.attempt,
        model: e.model || null,
        promptVersionHash: e.promptHash ?? null,
        // what a user reads (the issues of the last answer), never the raw reply
        reason: e.message.slice(0, 2000),
        promptTokens: e.usage?.promptTokens ?? null,
        completionTokens: e.usage?.completionTokens ?? null,
        occurredAt: now(),
      }),
    ]);

  /** Runs one LLM stage with heartbeats and records its StageCompleted (or StageFailed). */
  const llm = async <T>(
    ref: StageRef,
    run: (cfg: GeneratorConfig, opts: stages.StageOptions) => Promise<stages.StageResult<T>>,
  ) => {
    const ctx = Context.current();
    const cfg = genCfg(ref.config);
    let r: stages.StageResult<T>;
    try {
      r = await run(cfg, {
        heartbeat: () => ctx.heartbeat(),
        signal: ctx.cancellationSignal,
        seed: samplingSeed(ref),
      });
    } catch (e) {
      // A stage whose every answer was refused still cost its tokens: counted, then recorded
      // before the non-retryable failure. When the record fails (PostgreSQL down), its error fails
      // the activity retryably; a retry, or one after a crash between the record and the throw,
      // records the same event id, which appends once.
      if (e instanceof GeneratorOutputError && e.stage in EVENT_STAGE) {
        const stage = EVENT_STAGE[e.stage as PromptName];
        generatorTokens(stage, e.usage);
        await recordStageFailed(ref, e, stage);
      }
      asFailure(e);
    }
    await recordStage(ref, r.prompt, {
      stage: r.stage,
      model: r.model,
      promptVersionHash: r.promptHash,
      outputHash: r.outputHash,
      promptTokens: r.usage?.promptTokens ?? null,
      completionTokens: r.usage?.completionTokens ?? null,
    });
    generatorTokens(r.stage, r.usage);
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
          generatorModel: (campaignConfigOf(input.config).generator as { model: string }).model,
          occurredAt: now(),
        }),
      ]);
    },

    planTask(input: StageRef & { seed: TaskRecord; blocklist: string[] }) {
      const limits = campaignConfigOf(input.config).synthesis;
      return llm<Plan>(input, (cfg, opts) =>
        stages.plan(
          input.seed,
          {
            blocklist: input.blocklist,
            limits: {
              minTurns: limits.turns.min,
              maxTurns: limits.turns.max,
              minCallsPerTurn: limits.callsPerTurn.min,
              // the seed's largest turn raises the cap for its children
              maxCallsPerTurn: callsPerTurnCap(limits.callsPerTurn.max, input.seed),
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

    /** The rewrite-off ablation: one turn's user message, from that turn's calls alone. */
    async writeTurnQuery(input: StageRef & { candidate: Candidate; turn: number }) {
      return llm(input, (cfg, opts) => stages.turnQuery(input.candidate, input.turn, cfg, opts));
    },

    /**
     * The quality judge, shown the candidate's execution (each call's result and the state after
     * each turn, from a fresh run); its verdict is then recomputed from its scores by the rule
     * (domain/judge-rule.ts), which wins a disagreement.
     */
    async judgeCandidate(input: StageRef & { candidate: Candidate; execution?: unknown }) {
      let run: ExecuteResponse;
      try {
        run = await deps.executor.execute(executeRequest(input.candidate));
      } catch (e) {
        asFailure(e);
      }
      const execution = executionSummary(run);
      const r = await llm<Judgement>(input, (cfg, opts) =>
        stages.judge(input.candidate, { ...cfg, model: cfg.judgeModel }, { ...opts, execution }),
      );
      const settled = settleVerdict(r.value);
      return {
        ...r,
        value: settled.judgement,
        ...(settled.disagreement ? { disagreement: settled.disagreement } : {}),
      };
    },

    async refineCandidate(input: StageRef & { candidate: Candidate; judgement: Judgement }) {
      const r = await llm(input, (cfg, opts) => stages.refine(input.candidate, input.judgement, cfg, opts));
      return { ...r, candidate: { ...r.value.candidate, id: input.candidate.id } as Candidate };
    },

    /**
     * The Augment stage: the generator chooses what to withhold (and, for miss_param, writes the
     * two user messages); the variant is built from that choice by domain/augment.ts.
     */
    async augmentCandidate(input: StageRef & { candidate: Candidate; kind: VariantKind }) {
      const r = await llm(input, (cfg, opts) => stages.augment(input.candidate, input.kind, cfg, opts));
      return { ...r, variant: buildVariant(input.candidate, augmentChoice(input.kind, r.value)) };
    },

    /** Runs the candidate's ground truth in fresh environment instances (Execute, and the Critique's re-execution). */
    async executeCandidate(input: {
      candidate: Candidate;
    }): Promise<{ ok: boolean; failure: Failure | null; statesHash: string }> {
      let r: ExecuteResponse;
      try {
        r = await deps.executor.execute(executeRequest(input.candidate));
      } catch (e) {
        asFailure(e);
      }
      return {
        ok: r.ok,
        failure: r.failure ?? null,
        statesHash: sha256(JSON.stringify(r.turns.map((t) => t.state))),
      };
    },

    /**
     * The deterministic gates of the Critique stage (domain/candidate.ts) and, given the seed, the
     * structure check against it (domain/structure.ts), whose per-turn call cap follows the seed.
     */
    async gateCandidate(input: {
      candidate: Candidate;
      config: unknown;
      seed?: TaskRecord;
      variant?: boolean;
    }) {
      const cfg = campaignConfigOf(input.config);
      const limits = gateLimits(cfg);
      // an Augment variant is its validated base plus the turn that brings the function or value
      if (input.variant) limits.turns.max += 1;
      if (input.seed) limits.callsPerTurn.max = callsPerTurnCap(limits.callsPerTurn.max, input.seed);
      // Gated as what its structure makes it (domain/structure.ts), as it is recorded.
      const g = checkCandidate(labelled(input.candidate), TOOL_CATALOG, limits);
      if (!g.ok) return { ok: false as const, code: g.code, reason: g.reason };
      const mismatch = input.seed
        ? structureMismatch(input.candidate, input.seed, cfg.synthesis.structureTolerance)
        : undefined;
      if (mismatch)
        return { ok: false as const, code: 'structure-mismatch', reason: `unlike its seed: ${mismatch}` };
      return { ok: true as const };
    },

    /** StageCompleted for a stage without a model (execute, critique, augment). */
    async stageCompleted(
      input: StageRef & { stage: 'execute' | 'critique' | 'augment'; output: unknown },
    ): Promise<void> {
      await recordStage(input, input.stage, {
        stage: input.stage,
        model: null,
        promptVersionHash: null,
        outputHash: sha256(JSON.stringify(input.output)),
      });
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
            /** An Augment variant's base candidate: it and its other variants are not near-duplicates of it. */
            derivedFrom?: string;
          }
        | {
            kind: 'rejected';
            campaignId: string;
            synthesisId: string;
            seedTaskId: string;
            candidateId: string | null;
            stage: RejectionStage;
            reasonCode: string;
            reason: string;
            raw?: unknown;
          },
    ): Promise<{ outcome: 'validated' | 'rejected'; reasonCode?: string; candidateId?: string }> {
      const stream = streams.synthesis(input.synthesisId);
      // Read before the transaction: the evaluation set comes from the executor, not the store.
      const contamination =
        input.kind === 'validated'
          ? await evalContamination(input.campaignId, labelled(input.candidate))
          : undefined;
      return inTransaction(deps.pool, async (c) => {
        // What both outcome events say about where the candidate came from.
        const origin = <Id extends string | null>(candidateId: Id) => ({
          campaignId: input.campaignId,
          synthesisId: input.synthesisId,
          candidateId,
          seedTaskId: input.seedTaskId,
        });
        const reject = async (r: {
          candidateId: string | null;
          stage: RejectionStage;
          reasonCode: string;
          reason: string;
          raw?: unknown;
        }) => {
          await recordEventsIn(c, stream, [
            ev(
              'CandidateRejected',
              eventIds.candidateRejected(input.synthesisId),
              {
                ...origin(r.candidateId),
                stage: r.stage,
                reasonCode: r.reasonCode,
                reason: r.reason.slice(0, 2000),
                occurredAt: now(),
              },
              r.raw !== undefined ? { raw: r.raw } : {},
            ),
          ]);
          return { outcome: 'rejected' as const, reasonCode: r.reasonCode };
        };
        if (input.kind === 'rejected') return reject(input);
        // Recorded under the category its structure gives it: the quotas and BFCL's scoring read it.
        const candidate = labelled(input.candidate);
        const hash = candidateHash(candidate);
        const dup = await candidateWithHash(c, input.campaignId, hash, candidate.id);
        if (dup) {
          return reject({
            candidateId: candidate.id,
            stage: 'critique',
            reasonCode: 'duplicate-candidate',
            reason: `exact duplicate (content hash ${hash.slice(0, 16)}) of candidate ${dup}`,
          });
        }
        const near = await nearestKnownTask(c, input.campaignId, candidate, input.derivedFrom);
        if (near && near.similarity.score >= near.threshold) {
          const { score, text, calls } = near.similarity;
          return reject({
            candidateId: candidate.id,
            stage: 'critique',
            reasonCode: 'near-duplicate',
            reason: `near duplicate of ${near.task.kind} ${near.task.id}: similarity ${score.toFixed(3)} (question ${text.toFixed(3)}, calls ${calls.toFixed(3)}) >= ${near.threshold}`,
          });
        }
        if (contamination) {
          return reject({
            candidateId: candidate.id,
            stage: 'critique',
            reasonCode: 'eval-contamination',
            reason: contaminationReason(contamination.match, contamination.rule),
          });
        }
        await recordEventsIn(c, stream, [
          ev(
            'CandidateValidated',
            eventIds.candidateValidated(input.synthesisId),
            {
              ...origin(candidate.id),
              category: candidate.category,
              candidate: JSON.stringify(candidate),
              candidateHash: hash,
              judgeModel: input.judge.model,
              judgeScores: input.judge.scores,
              refined: input.refined,
              occurredAt: now(),
            },
            {
              lineage: { ...input.lineage, category: candidate.category, judgeReasons: input.judge.reasons },
            },
          ),
        ]);
        return { outcome: 'validated', candidateId: input.candidate.id };
      });
    },
  };
}

export type SynthesisActivities = ReturnType<typeof createSynthesisActivities>;

/** The candidate under the category its structure gives it (domain/structure.ts structuralCategory). */
const labelled = (c: Candidate): Candidate => {
  const category = structuralCategory(c);
  return category === c.category ? c : { ...c, category };
};

/**
 * The seed or earlier candidate (validated or injected) of the campaign most similar to a
 * candidate, with the campaign's threshold. Read inside the outcome's transaction, under the same
 * per-campaign lock as the exact-duplicate check, so two near-copies cannot both pass.
 */
async function nearestKnownTask(
  c: pg.PoolClient,
  campaignId: string,
  candidate: Candidate,
  derivedFrom?: string,
) {
  const campaign = await loadCampaign(c, campaignId);
  const threshold = (campaign?.config ?? DEFAULT_CONFIG).synthesis.nearDuplicateThreshold;
  const near = nearestTask(
    taskFeatures(candidate),
    await knownTasks(c, campaignId, candidate.id, derivedFrom),
  );
  return near && { ...near, threshold };
}
