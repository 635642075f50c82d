// The synthesis workflow: one per selected boundary seed. The five stages of docs/architecture.md §3 —
// plan; execute (at most `maxConfigRepairs` config-patch repairs, failed functions blocklisted
// for re-planning); coherence rewrite; critique (deterministic gates and a fresh re-execution,
// then the LLM quality judge, at most `maxRefinements` classify-and-rewrite refinements);
// augment (miss_func / miss_param variants of the validated candidate, by the seed's category
// unless configured). Every stage records StageCompleted; the run ends in
// CandidateValidated or CandidateRejected with the stage and reason, and reports to the campaign.
import {
  ActivityFailure,
  ApplicationFailure,
  getExternalWorkflowHandle,
  patched,
  proxyActivities,
  proxyLocalActivities,
  workflowInfo,
} from '@temporalio/workflow';
import type { Failure } from '../activities/executor-client.js';
import type { Candidate, Judgement } from '../activities/llm/schemas.js';
import type { SynthesisActivities } from '../activities/synthesis.js';
import { type VariantKind, variantKinds } from '../domain/augment.js';
import { parseCampaignConfig } from '../domain/campaign-config.js';
import type { SynthesisOutcome } from '../domain/campaign-state.js';
import * as ids from '../domain/ids.js';
import type { SelectedSeed } from '../domain/step-plan.js';
import { TEN_MINUTES_OF_RETRIES } from './activity-options.js';

export interface SynthesisInput {
  campaignId: string;
  synthesisId: string;
  step: number;
  seed: SelectedSeed;
  config: unknown;
  parentWorkflowId: string;
}

type StageName = 'plan' | 'execute' | 'rewrite' | 'critique' | 'refine' | 'augment';

// LLM calls heartbeat every few seconds: a worker that dies is noticed within the heartbeat timeout.
const llm = proxyActivities<SynthesisActivities>({
  startToCloseTimeout: '10 minutes',
  heartbeatTimeout: '20 seconds',
  retry: { initialInterval: '2 seconds', maximumInterval: '1 minute', maximumAttempts: 4 },
});
// The executor may be restarting or briefly overloaded (503 with Retry-After): keep trying for
// ten minutes before the candidate is rejected as executor-unavailable; refusals are not retried.
const env = proxyActivities<SynthesisActivities>(TEN_MINUTES_OF_RETRIES);

// The run's bookkeeping (SynthesisStarted, StageCompleted, the gates, the outcome): short
// database writes and pure checks, run as local activities in the worker that runs the workflow.
// As ordinary activities each cost a round trip through the server's task queue, about half of
// a synthesis' wall time on a loaded machine. A local activity that completed but whose workflow
// task did not runs again on replay: each writes under a deterministic event id, so a second
// run records nothing new.
const local = proxyLocalActivities<SynthesisActivities>(TEN_MINUTES_OF_RETRIES);
const LOCAL_BOOKKEEPING = 'local-bookkeeping-activities';
type Bookkeeping = typeof env;

/** A failure that ends the run with a CandidateRejected. */
class Rejection extends Error {
  constructor(
    readonly stage: StageName,
    readonly code: string,
    message: string,
    readonly candidateId: string | null = null,
    /** The generator's raw answers when they failed their schema (kept for audit). */
    readonly raw?: unknown,
  ) {
    super(message);
  }
}

/** The function name of a call string (`cd(folder='x')` -> `cd`), for the blocklist. */
function callName(call: string): string | null {
  const m = /^\s*([A-Za-z_][A-Za-z0-9_]*)\s*\(/.exec(call);
  return m ? m[1]! : null;
}

// At most maxConfigRepairs config-patch repairs per candidate in all, as the method budgets them;
// before this patch each of the up to maxConfigRepairs + 1 plans had that many repairs of its own.
const REPAIR_BUDGET_PER_CANDIDATE = 'repair-budget-per-candidate';
/** Candidate ids name a generated parent by root and key (domain/ids.ts candidateId); runs started before keep the chain form. */
const BOUNDED_CANDIDATE_IDS = 'bounded-candidate-ids';

/** What the critique records when the judge is ablated (config.ablation.judge false). */
const JUDGE_OFF: { verdict: 'accept'; scores: Record<string, number>; reasons: string[] } = {
  verdict: 'accept',
  scores: {},
  reasons: ['judge off (ablation)'],
};

export async function synthesisWorkflow(input: SynthesisInput): Promise<SynthesisOutcome> {
  const { campaignId, synthesisId, seed } = input;
  const cfg = parseCampaignConfig(input.config);
  const ref = (attempt: number) => ({ campaignId, synthesisId, attempt, config: input.config });
  const candidateId = (patched(BOUNDED_CANDIDATE_IDS) ? ids.candidateId : ids.legacyCandidateId)(
    seed.taskId,
    input.step,
  );
  const book: Bookkeeping = patched(LOCAL_BOOKKEEPING) ? local : env;
  let stage: StageName = 'plan';
  let current: Candidate | null = null;
  let outcome: SynthesisOutcome;
  let validatedBase: Candidate | null = null;

  await book.synthesisStarted({
    campaignId,
    synthesisId,
    seedTaskId: seed.taskId,
    selectionEventId: seed.selectionEventId,
    config: input.config,
  });
  const models: Record<string, string> = {};
  const prompts: Record<string, string> = {};
  const outputs: Record<string, string> = {};
  const note = (name: string, r: { model: string; promptHash: string; outputHash: string }) => {
    models[name] = r.model;
    prompts[name] = r.promptHash;
    outputs[name] = r.outputHash;
  };

  try {
    // Plan and Execute, with config-patch repairs and re-planning around failing functions.
    const blocklist: string[] = [];
    let executed: { ok: boolean; failure: Failure | null } = { ok: false, failure: null };
    let narrative: string | undefined;
    let attempt = 0;
    for (let replan = 0; replan <= cfg.synthesis.maxConfigRepairs && !executed.ok; replan++) {
      stage = 'plan';
      const planned = await llm.planTask({ ...ref(replan), seed: seed.task, blocklist });
      note('plan', planned);
      narrative = (planned.value as { narrative?: string }).narrative;
      stage = 'execute';
      const drafted = await llm.generateCandidate({
        ...ref(replan),
        plan: planned.value,
        seed: seed.task,
        candidateId,
      });
      note('params', drafted);
      let cand: Candidate = drafted.candidate;
      current = cand;
      executed = await env.executeCandidate({ candidate: cand });
      const perCandidate = patched(REPAIR_BUDGET_PER_CANDIDATE);
      const maxRepairs = cfg.synthesis.maxConfigRepairs;
      for (
        let repair = 1;
        !executed.ok && (perCandidate ? attempt < maxRepairs : repair <= maxRepairs);
        repair++
      ) {
        attempt++;
        const repaired: { candidate: Candidate; model: string; promptHash: string; outputHash: string } =
          await llm.patchConfig({ ...ref(attempt), candidate: cand, failure: executed.failure!, repair });
        note('config-patch', repaired);
        cand = repaired.candidate;
        current = cand;
        executed = await env.executeCandidate({ candidate: cand });
      }
      // Only a function that ran and failed is blocklisted: a call string that did not parse, or
      // named an unknown function, says nothing against a valid function.
      if (!executed.ok && executed.failure?.kind === 'execution') {
        const failed = callName(executed.failure.call);
        if (failed && !blocklist.includes(failed)) blocklist.push(failed);
      }
    }
    if (!executed.ok || !current) {
      throw new Rejection(
        'execute',
        'execution-failed',
        `ground truth does not execute after repairs and re-planning: ${executed.failure?.reason ?? 'unknown'} (blocklist: ${blocklist.join(', ') || 'none'})`,
        current?.id ?? null,
      );
    }
    await book.stageCompleted({ ...ref(0), stage: 'execute', output: current.ground_truth });

    // Coherence rewrite; ablated: each turn's message written alone (attempt = turn index).
    stage = 'rewrite';
    let cand: Candidate;
    if (cfg.ablation.rewrite) {
      const rewritten = await llm.rewriteCandidate({
        ...ref(0),
        candidate: current,
        narrative,
        seed: seed.task,
      });
      note('rewrite', rewritten);
      cand = rewritten.candidate;
    } else {
      const question: { role: 'user'; content: string }[][] = [];
      for (let t = 0; t < current.ground_truth.length; t++) {
        const q = await llm.writeTurnQuery({ ...ref(t), candidate: current, turn: t });
        note(t === 0 ? 'turn-query' : `turn-query-${t}`, q);
        question.push([{ role: 'user', content: q.value.content }]);
      }
      cand = { ...current, question };
    }
    current = cand;

    // Critique: deterministic gates and a fresh re-execution, then the judge; one refinement.
    stage = 'critique';
    let judgement: Judgement | typeof JUDGE_OFF | null = null;
    let judgeModel = '';
    let refined = false;
    // Rounds where the judge's verdict contradicted its scores (the rule decided): lineage.
    const disagreements: { round: number; judge: string; rule: string }[] = [];
    for (let round = 0; ; round++) {
      const judged = await critique(book, input, cfg.ablation.judge, ref(round), cand);
      if (!judged) {
        judgement = JUDGE_OFF;
        judgeModel = 'none';
        break;
      }
      note(round === 0 ? 'judge' : `judge-${round}`, judged);
      judgement = judged.value;
      judgeModel = judged.model;
      if (judged.disagreement) disagreements.push({ round, ...judged.disagreement });
      if (judgement.verdict === 'accept') break;
      if (round >= cfg.synthesis.maxRefinements) throw judgeRejection(judgement, cand.id);
      stage = 'refine';
      const r = await llm.refineCandidate({ ...ref(round), candidate: cand, judgement });
      note('refine', r);
      cand = r.candidate;
      current = cand;
      refined = true;
      stage = 'critique';
    }
    await book.stageCompleted({ ...ref(0), stage: 'critique', output: judgement });

    const r = await book.recordOutcome({
      kind: 'validated',
      campaignId,
      synthesisId,
      seedTaskId: seed.taskId,
      candidate: cand,
      judge: { model: judgeModel, scores: judgement.scores, reasons: judgement.reasons },
      refined,
      lineage: {
        parents: [seed.taskId],
        rootSeedId: seed.rootSeedId,
        depth: seed.depth,
        parentPhi: seed.phi,
        category: cand.category,
        ...provenance(input, synthesisId, { models, prompts, outputs }, judgement),
        ...(disagreements.length > 0 ? { judgeDisagreements: disagreements } : {}),
      },
    });
    outcome = { synthesisId, outcome: r.outcome, candidateId: r.candidateId, reasonCode: r.reasonCode };
    if (r.outcome === 'validated') validatedBase = cand;
  } catch (e) {
    const rej = toRejection(e, stage, current?.id ?? null);
    const r = await recordRejection(book, campaignId, synthesisId, seed.taskId, rej);
    outcome = { synthesisId, outcome: r.outcome, reasonCode: rej.code };
  }
  // Augment: variants of the validated candidate, each validated and recorded as its own
  // candidate under its own synthesis id; the run still reports one outcome (its base's).
  const kinds = validatedBase ? variantKinds(seed.task.category, cfg.synthesis.augment) : [];
  if (validatedBase && kinds.length > 0 && patched(AUGMENT_STAGE)) {
    for (const kind of kinds) {
      await augmentVariant(input, cfg, book, validatedBase, kind, models, prompts, outputs);
    }
  }
  try {
    await getExternalWorkflowHandle(input.parentWorkflowId).signal('synthesisFinished', outcome);
  } catch {
    // The campaign may have ended; the outcome is in the event store either way.
  }
  return outcome;
}

const AUGMENT_STAGE = 'augment-stage';

/**
 * Critique, the same for a candidate and an Augment variant: the deterministic gates and a fresh
 * re-execution (a Rejection when either fails), then the quality judge's answer (null when the
 * judge is ablated). What a verdict other than accept means is the caller's: refine, or reject.
 */
async function critique(
  book: Bookkeeping,
  input: SynthesisInput,
  judge: boolean,
  ref: { campaignId: string; synthesisId: string; attempt: number; config: unknown },
  candidate: Candidate,
  variant = false,
) {
  const gates = await book.gateCandidate({
    candidate,
    config: input.config,
    seed: input.seed.task,
    ...(variant ? { variant: true } : {}),
  });
  if (!gates.ok) throw new Rejection('critique', gates.code, gates.reason, candidate.id);
  const again = await env.executeCandidate({ candidate });
  if (!again.ok)
    throw new Rejection(
      'critique',
      'reexecution-failed',
      `fresh re-execution failed: ${again.failure?.reason}`,
      candidate.id,
    );
  if (!judge) return null;
  return llm.judgeCandidate({ ...ref, candidate, execution: { ok: true } });
}

/**
 * What a validated candidate's lineage says about how it was made, the same for a base candidate
 * and an Augment variant: the step, policy and statistics that selected its seed, the run, and
 * each stage's model, prompt version and output hash, and the judge's verdict.
 */
function provenance(
  input: SynthesisInput,
  synthesisId: string,
  stages: {
    models: Record<string, string>;
    prompts: Record<string, string>;
    outputs: Record<string, string>;
  },
  judgement: { verdict: string; scores: Record<string, number> },
) {
  return {
    step: input.step,
    policyVersion: input.seed.policyVersion,
    triggeringStats: input.seed.stats,
    selectionEventId: input.seed.selectionEventId,
    synthesisId,
    workflowId: workflowInfo().workflowId,
    models: stages.models,
    promptVersions: stages.prompts,
    stageOutputs: stages.outputs,
    judgeVerdict: judgement.verdict,
    judgeScores: judgement.scores,
  };
}

const judgeRejection = (judgement: Judgement, candidateId: string) =>
  new Rejection(
    'critique',
    'judge-rejected',
    `quality judge: ${judgement.reasons.join('; ') || 'rejected'}`,
    candidateId,
  );

/**
 * One Augment variant: the generator's choice, the variant built from it (domain/augment.ts), then
 * the Critique as for any candidate (gates, fresh re-execution, judge; no refinement, which could
 * undo the variant's shape), and its own outcome. Lineage: variant -> base candidate -> seed.
 * Never throws: a variant that fails is a CandidateRejected of its own, the base stays validated.
 */
async function augmentVariant(
  input: SynthesisInput,
  cfg: ReturnType<typeof parseCampaignConfig>,
  book: Bookkeeping,
  base: Candidate,
  kind: VariantKind,
  baseModels: Record<string, string>,
  basePrompts: Record<string, string>,
  baseOutputs: Record<string, string>,
): Promise<void> {
  const { campaignId, seed } = input;
  const synthesisId = ids.variantSynthesisId(input.synthesisId, kind);
  const ref = (attempt: number) => ({ campaignId, synthesisId, attempt, config: input.config });
  const models = { ...baseModels };
  const prompts = { ...basePrompts };
  const outputs = { ...baseOutputs };
  let stage: StageName = 'augment';
  let variant: Candidate | null = null;
  try {
    try {
      const a = await llm.augmentCandidate({ ...ref(0), candidate: base, kind });
      models.augment = a.model;
      prompts.augment = a.promptHash;
      outputs.augment = a.outputHash;
      variant = a.variant;
      stage = 'critique';
      const judged = await critique(book, input, cfg.ablation.judge, ref(0), variant, true);
      let judgement: Judgement | typeof JUDGE_OFF = JUDGE_OFF;
      let judgeModel = 'none';
      let disagreement: { judge: string; rule: string } | undefined;
      if (judged) {
        models.judge = judged.model;
        prompts.judge = judged.promptHash;
        outputs.judge = judged.outputHash;
        judgement = judged.value;
        judgeModel = judged.model;
        disagreement = judged.disagreement;
        if (judgement.verdict !== 'accept') throw judgeRejection(judgement, variant.id);
      }
      await book.stageCompleted({ ...ref(0), stage: 'critique', output: judgement });
      await book.recordOutcome({
        kind: 'validated',
        campaignId,
        synthesisId,
        seedTaskId: seed.taskId,
        candidate: variant,
        judge: { model: judgeModel, scores: judgement.scores, reasons: judgement.reasons },
        refined: false,
        derivedFrom: base.id,
        lineage: {
          // the base candidate first: the variant is derived from it; its root is the seed's
          parents: [base.id, seed.taskId],
          rootSeedId: seed.rootSeedId,
          // the first parent's depth (the base is one below its seed), as for a base candidate
          depth: seed.depth + 1,
          parentPhi: seed.phi,
          category: variant.category,
          variantOf: base.id,
          variantKind: kind,
          baseSynthesisId: input.synthesisId,
          ...provenance(input, synthesisId, { models, prompts, outputs }, judgement),
          ...(disagreement ? { judgeDisagreements: [{ round: 0, ...disagreement }] } : {}),
        },
      });
    } catch (e) {
      await recordRejection(
        book,
        campaignId,
        synthesisId,
        seed.taskId,
        toRejection(e, stage, variant?.id ?? null),
      );
    }
  } catch {
    // Recording the variant's outcome failed: the base's outcome stands, the variant is lost.
  }
}

/** Every failure becomes a rejection with its stage and a reason code. */
/** Records a run's (or a variant's) CandidateRejected. */
function recordRejection(
  book: Bookkeeping,
  campaignId: string,
  synthesisId: string,
  seedTaskId: string,
  rej: Rejection,
) {
  return book.recordOutcome({
    kind: 'rejected',
    campaignId,
    synthesisId,
    seedTaskId,
    candidateId: rej.candidateId,
    stage: rej.stage,
    reasonCode: rej.code,
    reason: rej.message,
    ...(rej.raw !== undefined ? { raw: rej.raw } : {}),
  });
}

function toRejection(e: unknown, stage: StageName, candidateId: string | null): Rejection {
  if (e instanceof Rejection) return e;
  const cause = e instanceof ActivityFailure ? e.cause : e;
  if (cause instanceof ApplicationFailure) {
    const code =
      cause.type === 'GeneratorOutputError'
        ? 'generator-output-invalid'
        : cause.type === 'GeneratorUnavailableError'
          ? 'generator-unavailable'
          : cause.type === 'GeneratorRequestError'
            ? 'generator-request-refused'
            : cause.type === 'ExecutorUnavailable'
              ? 'executor-unavailable'
              : cause.type === 'ExecutorRequestRefused'
                ? 'executor-request-refused'
                : 'activity-failed';
    const raw =
      cause.type === 'GeneratorOutputError'
        ? (cause.details?.[0] as { raw?: unknown } | undefined)?.raw
        : undefined;
    return new Rejection(stage, code, cause.message, candidateId, raw);
  }
  const msg = e instanceof Error ? e.message : String(e);
  return new Rejection(stage, 'synthesis-failed', msg, candidateId);
}
