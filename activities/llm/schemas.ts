// Output schemas of the LLM stages (zod). Base schemas give response_format its JSON Schema; the
// builders add the checks that depend on the input (classes of the seed, blocklist, turn counts),
// so that an answer breaking them is re-asked like any other invalid answer.
import { z } from 'zod';
import { choiceProblem, type VariantChoice, type VariantKind } from '../../domain/augment.js';
import { type TaskRecord, TaskRecordSchema } from '../../domain/task.js';

/** A candidate task: a BFCL multi-turn record {id, category, involved_classes, initial_config, question, ground_truth, missed_function?}. */
export const CandidateSchema = TaskRecordSchema;
export type Candidate = TaskRecord;

/** Shape limits of a planned task (the paper: 2–5 turns, 1–3 calls a turn). */
export interface SynthesisLimits {
  minTurns: number;
  maxTurns: number;
  minCallsPerTurn: number;
  maxCallsPerTurn: number;
}
export const DEFAULT_LIMITS: SynthesisLimits = {
  minTurns: 2,
  maxTurns: 5,
  minCallsPerTurn: 1,
  maxCallsPerTurn: 3,
};

const Identifier = z.string().regex(/^[A-Za-z_][A-Za-z0-9_]*$/, 'must be an identifier');
const InitialConfig = z.record(z.string(), z.record(z.string(), z.unknown()));

export const PlanFunctionSchema = z.object({ class: Identifier, name: Identifier });
export type PlanFunction = z.infer<typeof PlanFunctionSchema>;

export function planBaseSchema(limits: SynthesisLimits = DEFAULT_LIMITS) {
  return z.object({
    functions: z
      .array(z.array(PlanFunctionSchema).min(limits.minCallsPerTurn).max(limits.maxCallsPerTurn))
      .min(limits.minTurns)
      .max(limits.maxTurns),
    narrative: z.string().min(1).max(2000),
  });
}
export type Plan = z.infer<ReturnType<typeof planBaseSchema>>;

/** A blocklist entry is `name` or `Class.name`. */
export function isBlocked(blocklist: readonly string[], cls: string, name: string): boolean {
  return blocklist.includes(name) || blocklist.includes(`${cls}.${name}`);
}

/** The plan schema for a seed: classes of the seed only, nothing from the blocklist. */
export function planSchema(seed: TaskRecord, blocklist: readonly string[] = [], limits = DEFAULT_LIMITS) {
  return planBaseSchema(limits).superRefine((plan, ctx) => {
    plan.functions.forEach((turn, t) => {
      turn.forEach((f, i) => {
        if (!seed.involved_classes.includes(f.class)) {
          ctx.addIssue({
            code: 'custom',
            path: ['functions', t, i, 'class'],
            message: `${f.class} is not one of the seed's classes (${seed.involved_classes.join(', ')})`,
          });
        }
        if (isBlocked(blocklist, f.class, f.name)) {
          ctx.addIssue({
            code: 'custom',
            path: ['functions', t, i, 'name'],
            message: `${f.class}.${f.name} is on the blocklist`,
          });
        }
      });
    });
  });
}

const CALL = /^\s*([A-Za-z_][A-Za-z0-9_]*)\s*\(.*\)\s*$/s;

/** The function name of a call string (syntax only: the executor's restricted parser decides). */
export function callName(call: string): string | null {
  return CALL.exec(call)?.[1] ?? null;
}

/** The environment executor's limit on one call string (the Critique gates are stricter: strings ≤ 200). */
export const MAX_CALL_CHARS = 20_000;

export const CallsBaseSchema = z.object({
  initial_config: InitialConfig,
  ground_truth: z.array(z.array(z.string().min(1).max(MAX_CALL_CHARS)).min(1)).min(1),
});
export type GeneratedCalls = z.infer<typeof CallsBaseSchema>;

/** An issue at `field` when the answer has another number of turns than `what` has. */
function turnCountIssue(
  ctx: z.RefinementCtx,
  field: string,
  what: string,
  expected: number,
  got: number,
): void {
  if (got !== expected)
    ctx.addIssue({
      code: 'custom',
      path: [field],
      message: `the ${what} has ${expected} turns, the answer ${got}`,
    });
}

/**
 * An issue per class of `config` that is not one of the task's. Some BFCL seeds carry state of a
 * class they do not involve; keeping that state is harmless, so a class the task's own config has
 * counts as the task's.
 */
function foreignClassIssues(ctx: z.RefinementCtx, config: object, task: TaskRecord): void {
  for (const cls of Object.keys(config))
    if (!task.involved_classes.includes(cls) && !(cls in task.initial_config))
      ctx.addIssue({
        code: 'custom',
        path: ['initial_config', cls],
        message: `${cls} is not one of the task's classes`,
      });
}

/** The parameter-stage schema for a plan: its turns, its functions, the seed's classes. */
export function callsSchema(plan: Plan, seed: TaskRecord) {
  return CallsBaseSchema.superRefine((out, ctx) => {
    turnCountIssue(ctx, 'ground_truth', 'plan', plan.functions.length, out.ground_truth.length);
    out.ground_truth.forEach((turn, t) => {
      const planned = new Set((plan.functions[t] ?? []).map((f) => f.name));
      turn.forEach((call, i) => {
        const name = callName(call);
        if (!name) {
          ctx.addIssue({
            code: 'custom',
            path: ['ground_truth', t, i],
            message: `not a call string of the form name(arg=value, ...): ${call.slice(0, 80)}`,
          });
        } else if (!planned.has(name)) {
          ctx.addIssue({
            code: 'custom',
            path: ['ground_truth', t, i],
            message: `${name} is not planned for turn ${t} (planned: ${[...planned].join(', ')})`,
          });
        }
      });
    });
    foreignClassIssues(ctx, out.initial_config, seed);
  });
}

export const PatchSchema = z.object({ initial_config: InitialConfig });
export type ConfigPatch = z.infer<typeof PatchSchema>;

export function patchSchema(candidate: TaskRecord) {
  return PatchSchema.superRefine((out, ctx) => {
    foreignClassIssues(ctx, out.initial_config, candidate);
  });
}

export const UserMessageSchema = z.object({ role: z.literal('user'), content: z.string().min(1).max(4000) });
export const RewriteBaseSchema = z.object({ question: z.array(z.array(UserMessageSchema).length(1)).min(1) });
export type Rewrite = z.infer<typeof RewriteBaseSchema>;

/** Identifiers that read as code when they appear verbatim in a user message (snake_case, camelCase). */
function codeLike(name: string): boolean {
  return name.includes('_') || /[a-z][A-Z]/.test(name);
}

/** The functions of `calls` a user message names (a call, or a code-like name verbatim). */
function namedFunctions(content: string, names: ReadonlySet<string>): string[] {
  return [...names].filter((name) => {
    const esc = name.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
    return (
      new RegExp(`\\b${esc}\\s*\\(`).test(content) ||
      (codeLike(name) && new RegExp(`\\b${esc}\\b`).test(content))
    );
  });
}

function callNames(calls: readonly string[]): Set<string> {
  return new Set(calls.flatMap((c) => callName(c) ?? []));
}

/** The rewrite schema for a candidate: one message per turn, no function names or call syntax. */
export function rewriteSchema(candidate: TaskRecord) {
  const names = callNames(candidate.ground_truth.flat());
  return RewriteBaseSchema.superRefine((out, ctx) => {
    turnCountIssue(ctx, 'question', 'candidate', candidate.ground_truth.length, out.question.length);
    out.question.forEach((turn, t) => {
      turn.forEach((m, i) => {
        for (const name of namedFunctions(m.content, names)) {
          ctx.addIssue({
            code: 'custom',
            path: ['question', t, i, 'content'],
            message: `names the function ${name}; say what the user wants instead`,
          });
        }
      });
    });
  });
}

/** The rewrite-off ablation's answer for one turn: its user message alone. */
export const TurnQueryBaseSchema = z.object({ content: UserMessageSchema.shape.content });
export type TurnQuery = z.infer<typeof TurnQueryBaseSchema>;

/** The turn-query schema for one turn's calls: no function names or call syntax. */
export function turnQuerySchema(calls: readonly string[]) {
  const names = callNames(calls);
  return TurnQueryBaseSchema.superRefine((out, ctx) => {
    for (const name of namedFunctions(out.content, names)) {
      ctx.addIssue({
        code: 'custom',
        path: ['content'],
        message: `names the function ${name}; say what the user wants instead`,
      });
    }
  });
}

export const JUDGE_CRITERIA = [
  'alignment',
  'state_consistency',
  'coherence',
  'naturalness',
  'ambiguity',
] as const;
export type JudgeCriterion = (typeof JUDGE_CRITERIA)[number];
const Score = z.number().min(0).max(1);
export const JudgementSchema = z.object({
  verdict: z.enum(['accept', 'reject']),
  scores: z.object({
    alignment: Score,
    state_consistency: Score,
    coherence: Score,
    naturalness: Score,
    ambiguity: Score,
  }),
  reasons: z.array(z.string().min(1).max(500)).max(10),
});
export type Judgement = z.infer<typeof JudgementSchema>;

export const REFINE_CLASSES = [
  'query_misaligned',
  'state_inconsistent',
  'incoherent',
  'unnatural',
  'ambiguity_malformed',
  'unfixable',
] as const;
export type RefineClass = (typeof REFINE_CLASSES)[number];
export const RefinementBaseSchema = z.object({
  classification: z.enum(REFINE_CLASSES),
  candidate: CandidateSchema,
});
export type Refinement = z.infer<typeof RefinementBaseSchema>;

/** The refine schema for a candidate: same id, category and classes. */
export function refinementSchema(candidate: TaskRecord) {
  return RefinementBaseSchema.superRefine((out, ctx) => {
    const c = out.candidate;
    if (c.id !== candidate.id) {
      ctx.addIssue({ code: 'custom', path: ['candidate', 'id'], message: `must stay ${candidate.id}` });
    }
    if (c.category !== candidate.category) {
      ctx.addIssue({
        code: 'custom',
        path: ['candidate', 'category'],
        message: `must stay ${candidate.category}`,
      });
    }
    const same =
      c.involved_classes.length === candidate.involved_classes.length &&
      c.involved_classes.every((x) => candidate.involved_classes.includes(x));
    if (!same) {
      ctx.addIssue({
        code: 'custom',
        path: ['candidate', 'involved_classes'],
        message: `must stay ${candidate.involved_classes.join(', ')}`,
      });
    }
  });
}

/** The Augment stage's answer (its choice; domain/augment.ts builds the variant from it). */
export const MissFuncAnswerSchema = z.object({ turn: z.number().int().min(0), function: Identifier });
export const MissParamAnswerSchema = z.object({
  turn: z.number().int().min(0),
  call: z.number().int().min(0),
  parameter: z.string().min(1).max(100),
  request: z.string().min(1).max(4000),
  follow_up: z.string().min(1).max(4000),
});
export type AugmentAnswer = z.infer<typeof MissFuncAnswerSchema> | z.infer<typeof MissParamAnswerSchema>;

export function augmentBaseSchema(kind: VariantKind): z.ZodType<AugmentAnswer> {
  return kind === 'miss_func' ? MissFuncAnswerSchema : MissParamAnswerSchema;
}

/** The generator's answer as the transformation's choice. */
export function augmentChoice(kind: VariantKind, a: AugmentAnswer): VariantChoice {
  if (kind === 'miss_func') {
    const f = a as z.infer<typeof MissFuncAnswerSchema>;
    return { kind, turn: f.turn, function: f.function };
  }
  const p = a as z.infer<typeof MissParamAnswerSchema>;
  return {
    kind,
    turn: p.turn,
    call: p.call,
    parameter: p.parameter,
    request: p.request,
    followUp: p.follow_up,
  };
}

/** The augment schema for a base candidate: a choice the transformation accepts (else re-asked). */
export function augmentSchema(base: TaskRecord, kind: VariantKind) {
  return augmentBaseSchema(kind).superRefine((a, ctx) => {
    const problem = choiceProblem(base, augmentChoice(kind, a));
    if (problem) ctx.addIssue({ code: 'custom', path: [], message: problem });
    if (kind === 'miss_param') {
      const p = a as z.infer<typeof MissParamAnswerSchema>;
      const names = new Set(base.ground_truth.flat().flatMap((c) => callName(c) ?? []));
      for (const [field, text] of [
        ['request', p.request],
        ['follow_up', p.follow_up],
      ] as const) {
        for (const name of names) {
          const esc = name.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
          if (new RegExp(`\\b${esc}\\s*\\(`).test(text))
            ctx.addIssue({ code: 'custom', path: [field], message: `writes a call of ${name}` });
        }
      }
    }
  });
}
