// The LLM steps of synthesis (docs/architecture.md §3), one function each: plan, parameters (Execute),
// config patch (Execute repairs), coherence rewrite, quality judge (Critique) and
// classify-and-rewrite refinement. Each sends its versioned prompt (prompts/) as the system
// message and its input as JSON in the user message, and returns the validated value with the
// lineage facts of StageCompleted: model, prompt version hash, output hash.
// Independent of Temporal: the workflow side wraps these as activities.
import type { z } from 'zod';
import type { VariantKind } from '../../domain/augment.js';
import type { TaskRecord } from '../../domain/task.js';
import { EVENT_STAGE, loadPrompt, type PromptName } from '../../platform/config/prompts.js';
import type { Stage } from '../../schemas/types.generated.js';
import type { Failure } from '../executor-client.js';
import {
  type ChatJsonOptions,
  type ChatJsonResult,
  type ChatMessage,
  chatJson,
  jsonSchemaOf,
} from './client.js';
import type { GeneratorConfig } from './config.js';
import {
  type AugmentAnswer,
  augmentBaseSchema,
  augmentSchema,
  CallsBaseSchema,
  type Candidate,
  type ConfigPatch,
  callsSchema,
  DEFAULT_LIMITS,
  type GeneratedCalls,
  type Judgement,
  JudgementSchema,
  PatchSchema,
  type Plan,
  patchSchema,
  planBaseSchema,
  planSchema,
  type Refinement,
  RefinementBaseSchema,
  type Rewrite,
  RewriteBaseSchema,
  refinementSchema,
  rewriteSchema,
  type SynthesisLimits,
  type TurnQuery,
  TurnQueryBaseSchema,
  turnQuerySchema,
} from './schemas.js';

export type StageOptions = Pick<ChatJsonOptions, 'heartbeat' | 'signal' | 'seed' | 'random'>;

export interface StageResult<T> extends ChatJsonResult<T> {
  /** The prompt that drove the step. */
  prompt: PromptName;
  /** The pipeline stage of the step (StageCompleted.stage). */
  stage: Stage;
  /** SHA-256 of the prompt file (StageCompleted.promptVersionHash). */
  promptHash: string;
}

/** The user message: the input as JSON, then the JSON Schema the answer must match. */
export function renderInput(input: unknown, jsonSchema: unknown): string {
  return (
    'INPUT:\n```json\n' +
    JSON.stringify(input) +
    '\n```\n\nReply with exactly one JSON object that matches this JSON Schema, and nothing else:\n```json\n' +
    JSON.stringify(jsonSchema) +
    '\n```'
  );
}

/** The fields of a task record a prompt shows (not bfcl's `path` bookkeeping). */
export function taskView(task: TaskRecord): Record<string, unknown> {
  const view: Record<string, unknown> = {
    id: task.id,
    category: task.category,
    involved_classes: task.involved_classes,
    initial_config: task.initial_config,
    question: task.question,
    ground_truth: task.ground_truth,
  };
  if (task.missed_function) view.missed_function = task.missed_function;
  if (task.excluded_function?.length) view.excluded_function = task.excluded_function;
  return view;
}

async function runStage<T>(
  name: PromptName,
  input: unknown,
  base: z.ZodType,
  checked: z.ZodType,
  cfg: GeneratorConfig,
  opts: StageOptions,
): Promise<StageResult<T>> {
  const prompt = loadPrompt(name, cfg.promptsDir);
  const jsonSchema = jsonSchemaOf(base);
  const messages: ChatMessage[] = [
    { role: 'system', content: prompt.text },
    { role: 'user', content: renderInput(input, jsonSchema) },
  ];
  const r = await chatJson(name, messages, checked, cfg, { ...opts, promptHash: prompt.hash, jsonSchema });
  return { ...(r as ChatJsonResult<T>), prompt: name, stage: EVENT_STAGE[name], promptHash: prompt.hash };
}

export interface PlanOptions {
  /** Functions (`name` or `Class.name`) that failed before; the seed's excluded functions are added. */
  blocklist?: readonly string[];
  limits?: SynthesisLimits;
}

/** Stage 1: the functions of every turn (same classes as the seed) and a short narrative. */
export function plan(
  seed: TaskRecord,
  { blocklist = [], limits = DEFAULT_LIMITS }: PlanOptions,
  cfg: GeneratorConfig,
  opts: StageOptions = {},
): Promise<StageResult<Plan>> {
  const blocked = [...new Set([...blocklist, ...(seed.excluded_function ?? [])])];
  return runStage(
    'plan',
    { seed: taskView(seed), blocklist: blocked, limits },
    planBaseSchema(limits),
    planSchema(seed, blocked, limits),
    cfg,
    opts,
  );
}

/** Stage 2 (Execute): the initial state and the ground-truth call strings of a plan. */
export function generateCalls(
  planned: Plan,
  seed: TaskRecord,
  cfg: GeneratorConfig,
  opts: StageOptions = {},
): Promise<StageResult<GeneratedCalls>> {
  return runStage(
    'params',
    { plan: planned, seed: taskView(seed) },
    CallsBaseSchema,
    callsSchema(planned, seed),
    cfg,
    opts,
  );
}

/** Stage 2 repair: a new initial_config after a failed execution (the caller caps repairs at 3). */
export function patchConfig(
  candidate: Candidate,
  failure: Failure,
  cfg: GeneratorConfig,
  opts: StageOptions & { repair?: number } = {},
): Promise<StageResult<ConfigPatch>> {
  const { repair, ...rest } = opts;
  return runStage(
    'config-patch',
    { candidate: taskView(candidate), failure, ...(repair !== undefined ? { repair } : {}) },
    PatchSchema,
    patchSchema(candidate),
    cfg,
    rest,
  );
}

export interface RewriteOptions extends StageOptions {
  /** The plan's narrative. */
  narrative?: string;
  /** The human seed task the candidate comes from (a guide to tone; the stand-in aligns turns with it). */
  seedTask?: TaskRecord;
}

/** Stage 3: one natural user message per turn that implies the turn's calls without naming them. */
export function rewrite(
  candidate: Candidate,
  cfg: GeneratorConfig,
  opts: RewriteOptions = {},
): Promise<StageResult<Rewrite>> {
  const { narrative, seedTask, ...rest } = opts;
  return runStage(
    'rewrite',
    {
      candidate: taskView(candidate),
      ...(narrative !== undefined ? { narrative } : {}),
      ...(seedTask ? { seed: taskView(seedTask) } : {}),
    },
    RewriteBaseSchema,
    rewriteSchema(candidate),
    cfg,
    rest,
  );
}

/**
 * The rewrite-off ablation (config.ablation.rewrite false): the user message of one turn, written
 * from that turn's calls and the initial state alone, so no turn knows the others.
 */
export function turnQuery(
  candidate: Candidate,
  turn: number,
  cfg: GeneratorConfig,
  opts: StageOptions = {},
): Promise<StageResult<TurnQuery>> {
  const calls = candidate.ground_truth[turn];
  if (!calls) throw new RangeError(`turn ${turn} is not a turn of ${candidate.id}`);
  return runStage(
    'turn-query',
    {
      involved_classes: candidate.involved_classes,
      initial_config: candidate.initial_config,
      calls,
    },
    TurnQueryBaseSchema,
    turnQuerySchema(calls),
    cfg,
    opts,
  );
}

/** Stage 4 (Critique): the LLM quality judge on five criteria (after the deterministic gates). */
export function judge(
  candidate: Candidate,
  cfg: GeneratorConfig,
  opts: StageOptions & { execution?: unknown } = {},
): Promise<StageResult<Judgement>> {
  const { execution, ...rest } = opts;
  return runStage(
    'judge',
    { candidate: taskView(candidate), ...(execution !== undefined ? { execution } : {}) },
    JudgementSchema,
    JudgementSchema,
    cfg,
    rest,
  );
}

/** Stage 4 refinement: classify what the judge disliked and return the rewritten candidate. */
export function refine(
  candidate: Candidate,
  judgement: Judgement,
  cfg: GeneratorConfig,
  opts: StageOptions = {},
): Promise<StageResult<Refinement>> {
  return runStage(
    'refine',
    { candidate: taskView(candidate), judgement },
    RefinementBaseSchema,
    refinementSchema(candidate),
    cfg,
    opts,
  );
}

/**
 * Stage 5 (Augment): which function to withhold (miss_func), or which value to leave out of a
 * request and the texts that leave it out and supply it (miss_param). The variant is built from
 * the answer by domain/augment.ts.
 */
export function augment(
  candidate: Candidate,
  kind: VariantKind,
  cfg: GeneratorConfig,
  opts: StageOptions = {},
): Promise<StageResult<AugmentAnswer>> {
  return runStage(
    'augment',
    { kind, candidate: taskView(candidate) },
    augmentBaseSchema(kind),
    augmentSchema(candidate, kind),
    cfg,
    opts,
  );
}

/**
 * A candidate record from the parameter stage's output, before the rewrite: one empty question
 * per turn. Category and classes come from the seed unless given; the seed's excluded functions
 * stay excluded. (A miss_func/miss_param variant is the Augment stage's job.)
 */
export function draftCandidate(
  seed: TaskRecord,
  calls: GeneratedCalls,
  opts: { id: string; category?: TaskRecord['category'] },
): Candidate {
  return {
    id: opts.id,
    category: opts.category ?? seed.category,
    involved_classes: [...seed.involved_classes],
    initial_config: calls.initial_config,
    question: calls.ground_truth.map(() => []),
    ground_truth: calls.ground_truth,
    ...(seed.excluded_function?.length ? { excluded_function: [...seed.excluded_function] } : {}),
  };
}

/** The candidate with the rewrite stage's user messages. */
export function withQuestion(candidate: Candidate, rewritten: Rewrite): Candidate {
  return { ...candidate, question: rewritten.question.map((turn) => turn.map((m) => ({ ...m }))) };
}
