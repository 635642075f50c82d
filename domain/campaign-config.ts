// A campaign's configuration. Every number of the method is a config value (docs/architecture.md §1); the
// defaults are the paper's, or, where the paper publishes none (seed budget, quotas, cooldown,
// concurrency, epoch length), a documented choice. Validation messages say what to change.
//
// Pure: no I/O, no clock, no randomness; imported by workflow code (Temporal's sandbox).
import { z } from 'zod';
import { DetectorConfigSchema, type DetectorWindow, windowSpec } from './band.js';
import { canonicalJson } from './canonical-json.js';
import {
  CHECKPOINT_PLACEHOLDERS,
  endpointUrlIssue,
  fillCheckpoint,
  multiTurnTask,
  unknownPlaceholders,
} from './evaluation.js';
import { DEFAULT_REWARD_LIMITS } from './reward-group.js';
import { SEED_CATEGORIES } from './task.js';
import { issueLines } from './validation-issues.js';

/** The most rewards.maxRollouts may be: no campaign accepts larger groups (the gateway's bound too). */
export const MAX_ROLLOUTS_LIMIT = 1_000_000;

/**
 * The most bytes (UTF-8 of its canonical JSON) a campaign config may have. The whole config rides
 * in CampaignStarted and in the campaign workflow's input, so it must stay well under Temporal's
 * 2 MB payload limit and Kafka's message.max.bytes (infra/stack/kafka.ts).
 */
export const MAX_CAMPAIGN_CONFIG_BYTES = 256 * 1024;

/** UTF-8 length of the canonical JSON of a config (counted, not encoded: configs may be MiBs). */
export function campaignConfigBytes(config: unknown): number {
  const s = canonicalJson(config ?? {});
  let n = 0;
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    if (c < 0x80) n += 1;
    else if (c < 0x800) n += 2;
    else if (c >= 0xd800 && c <= 0xdbff && (s.charCodeAt(i + 1) & 0xfc00) === 0xdc00) {
      n += 4;
      i++;
    } else n += 3;
  }
  return n;
}

/** Why a config is too large to register, or undefined when it fits. */
export function campaignConfigSizeError(config: unknown): string | undefined {
  let n: number;
  try {
    n = campaignConfigBytes(config);
  } catch (e) {
    return `the campaign config is not storable JSON: ${(e as Error).message}`;
  }
  return n > MAX_CAMPAIGN_CONFIG_BYTES
    ? `the campaign config is ${n} bytes (canonical JSON); the limit is ${MAX_CAMPAIGN_CONFIG_BYTES} bytes (${MAX_CAMPAIGN_CONFIG_BYTES / 1024} KiB)`
    : undefined;
}

export const RewardLimitsSchema = z.object({
  maxRollouts: z.number().int().min(1).max(MAX_ROLLOUTS_LIMIT).default(DEFAULT_REWARD_LIMITS.maxRollouts),
  staleStepTolerance: z.number().int().min(0).default(DEFAULT_REWARD_LIMITS.staleStepTolerance),
  /**
   * A group older than its task's last step (published late: the gateway's send timed out and
   * its fallback published after the trainer moved on). `fold` (what new campaigns record): it
   * counts in the task's all-rollout statistics and its step, and leaves the latest group, the
   * signal and the band to the newer groups. `reject-stale` (campaigns recorded before, so that
   * they replay as they ran): more than staleStepTolerance steps older is dead-lettered.
   */
  lateGroups: z.enum(['fold', 'reject-stale']).default('reject-stale'),
});

// ---------------------------------------------------------------------------------------------
// Injection cadence

/**
 * When queued candidates are injected: at the end of every epoch of `pool.epochSteps` steps
 * (`epoch`), or every N steps (`steps:N`). Either way a step s is an injection boundary when s is
 * a positive multiple of the period (see isInjectionBoundary).
 */
export type InjectionCadence = { kind: 'epoch' } | { kind: 'steps'; every: number };

/** Parses `epoch` or `steps:N` (N >= 1), the config and CLI spelling of a cadence. */
export function parseCadence(spec: string): InjectionCadence {
  if (spec === 'epoch') return { kind: 'epoch' };
  const m = /^steps:(\d+)$/.exec(spec);
  if (m) {
    const every = Number(m[1]);
    if (!(Number.isSafeInteger(every) && every >= 1)) {
      throw new Error(`injectionCadence ${spec}: N must be an integer >= 1 (inject every N steps)`);
    }
    return { kind: 'steps', every };
  }
  throw new Error(
    `injectionCadence ${JSON.stringify(spec)}: expected 'epoch' (every pool.epochSteps steps) or 'steps:N'`,
  );
}

export function cadenceSpec(c: InjectionCadence): string {
  return c.kind === 'epoch' ? 'epoch' : `steps:${c.every}`;
}

// ---------------------------------------------------------------------------------------------
// Pool, selection, synthesis, generator

const share = (what: string) =>
  z.number().min(0, `${what} must be in [0, 1]`).max(1, `${what} must be in [0, 1]`);

export const PoolConfigSchema = z.strictObject({
  /** P_max: most generated tasks in the pool; over it the lowest-φ generated tasks are pruned. */
  generatedCap: z
    .number()
    .int('pool.generatedCap (P_max) must be a whole number of tasks')
    .min(0, 'pool.generatedCap (P_max) must be >= 0 (0 keeps no generated task)')
    .default(400),
  /** β: at most this share of the active pool is injected per injection. */
  injectionShare: z
    .number()
    .gt(0, 'pool.injectionShare (β) must be > 0: with 0 nothing is ever injected; use a small share instead')
    .max(1, 'pool.injectionShare (β) must be <= 1 (a share of the active pool per injection)')
    .default(0.2),
  /** `epoch` (every epochSteps steps) or `steps:N`. */
  injectionCadence: z
    .string()
    .default('epoch')
    .transform((s, ctx): InjectionCadence => {
      try {
        return parseCadence(s);
      } catch (e) {
        ctx.addIssue({ code: 'custom', message: (e as Error).message });
        return z.NEVER;
      }
    }),
  /** Steps per trainer epoch (the injection period when the cadence is `epoch`). */
  epochSteps: z
    .number()
    .int('pool.epochSteps must be a whole number of steps')
    .min(1, 'pool.epochSteps must be >= 1')
    .default(10),
  /** A task whose detector signal is above this retires as mastered. */
  retireMasteredAbove: share('pool.retireMasteredAbove').default(0.95),
  /** A generated task whose detector signal is below this (once observed) retires (burn-in). */
  burnInFloor: share('pool.burnInFloor').default(0.2),
  /** Whether human seeds may retire as mastered too (the paper keeps them). */
  retireSeeds: z.boolean().default(false),
  /**
   * k of a useful task: a generated task counts as useful when a reward group puts it in the
   * boundary band within k steps of its injection (what the generator's tokens are divided by).
   */
  usefulWithinSteps: z
    .number()
    .int('pool.usefulWithinSteps must be a whole number of steps')
    .min(0, 'pool.usefulWithinSteps must be >= 0')
    .default(10),
});

export const SelectionConfigSchema = z.strictObject({
  /** M: most seeds selected per step. */
  budgetPerStep: z
    .number()
    .int('selection.budgetPerStep (M) must be a whole number of seeds')
    .min(0, 'selection.budgetPerStep (M) must be >= 0 (0 selects nothing)')
    .default(8),
  /** M_τ: most seeds per category per step; a category without an entry gets no seed. */
  perCategoryQuota: z
    .record(
      z.string(),
      z
        .number()
        .int('selection.perCategoryQuota: a quota must be a whole number of seeds')
        .min(0, 'selection.perCategoryQuota: a quota must be >= 0'),
    )
    .refine((q) => !Object.hasOwn(q, ''), {
      message: 'selection.perCategoryQuota: a category name must not be empty',
    })
    .default({ base: 2, miss_func: 2, miss_param: 2, long_context: 2 }),
  /** c: a seed selected at step s may be selected again from step s + c + 1 on. */
  cooldownSteps: z
    .number()
    .int('selection.cooldownSteps (c) must be a whole number of steps')
    .min(0, 'selection.cooldownSteps (c) must be >= 0 (0: a seed may be reused at the next step)')
    .default(5),
  /** Most synthesis runs in flight at once; selection leaves the rest of the budget unused. */
  maxConcurrentSyntheses: z
    .number()
    .int('selection.maxConcurrentSyntheses must be a whole number')
    .min(1, 'selection.maxConcurrentSyntheses must be >= 1; set budgetPerStep to 0 to stop selecting')
    .default(4),
  /**
   * A seed whose latest reward group was flat (every rollout scored alike) gives GRPO no gradient
   * however close its mean is to 0.5: `skip` leaves such seeds out, `rank` orders the boundary
   * by the latest group's measured variance instead of φ, `off` is the paper's pure φ ranking.
   */
  varianceGuard: z.enum(['skip', 'rank', 'off']).default('skip'),
  /** Latest-group reward variance at or below which the guard calls a group flat (0.001: a standard deviation of about 0.03). */
  minGroupVariance: z
    .number()
    .min(0, 'selection.minGroupVariance must be in [0, 0.25]')
    .max(
      0.25,
      'selection.minGroupVariance must be in [0, 0.25] (0.25 is the largest variance of a [0, 1] reward)',
    )
    .default(0.001),
  /** Reward groups a task needs before it may be selected: one group is a noisy estimate of its band. */
  minGroups: z
    .number()
    .int('selection.minGroups must be a whole number of reward groups')
    .min(1, 'selection.minGroups must be >= 1')
    .default(2),
  /**
   * A seed whose `streak` most recent children were all rejected (duplicates, failed validation)
   * is passed over until `steps` steps after its last selection: synthesis spent on it yields
   * nothing. streak 0 turns this off (the paper's selection).
   */
  rejectionBackoff: z
    .strictObject({
      streak: z
        .number()
        .int('selection.rejectionBackoff.streak must be a whole number of children')
        .min(0, 'selection.rejectionBackoff.streak must be >= 0 (0: off)')
        .default(3),
      steps: z
        .number()
        .int('selection.rejectionBackoff.steps must be a whole number of steps')
        .min(1, 'selection.rejectionBackoff.steps must be >= 1')
        .default(10),
    })
    .prefault({}),
  /** A task whose latest group is more than this many steps old is not selected on it; 0: no limit. */
  maxStaleSteps: z
    .number()
    .int('selection.maxStaleSteps must be a whole number of steps')
    .min(0, 'selection.maxStaleSteps must be >= 0 (0: statistics never go stale)')
    .default(20),
});

const range = (what: string, min: number, max: number, floor: number) =>
  z
    .strictObject({
      min: z
        .number()
        .int(`${what}.min must be a whole number`)
        .min(floor, `${what}.min must be >= ${floor}`)
        .default(min),
      max: z
        .number()
        .int(`${what}.max must be a whole number`)
        .min(1, `${what}.max must be >= 1`)
        .default(max),
    })
    .refine((r) => r.min <= r.max, {
      message: `${what}.min must not exceed ${what}.max; lower min or raise max`,
      path: ['min'],
    });

export const SynthesisConfigSchema = z.strictObject({
  /** Config-patch repairs of the initial environment state in the Execute stage. */
  maxConfigRepairs: z
    .number()
    .int('synthesis.maxConfigRepairs must be a whole number')
    .min(0, 'synthesis.maxConfigRepairs must be >= 0')
    .default(3),
  /**
   * A validated candidate this similar (mean Jaccard of question trigrams and call sequence,
   * domain/near-duplicate.ts) to one of the campaign's seeds or earlier candidates is rejected as
   * a near-duplicate; 1 rejects only feature-identical copies.
   */
  nearDuplicateThreshold: z
    .number()
    .gt(0, 'synthesis.nearDuplicateThreshold must be in (0, 1]')
    .max(1, 'synthesis.nearDuplicateThreshold must be in (0, 1] (1: only feature-identical copies)')
    .default(0.9),
  /**
   * The contamination gate (domain/contamination.ts): a validated candidate is compared with every
   * evaluation task (the BFCL multi-turn tasks past the seeds of each category) and rejected as
   * eval-contamination when its user turns share `textOverlap` of their `ngram`-word n-grams with
   * one, or (sameCallsAndState) it has one's ground-truth calls from its initial state.
   */
  contamination: z
    .strictObject({
      enabled: z.boolean().default(true),
      ngram: z
        .number()
        .int('synthesis.contamination.ngram must be a whole number of words')
        .min(2, 'synthesis.contamination.ngram must be >= 2')
        .max(20, 'synthesis.contamination.ngram must be <= 20')
        .default(5),
      textOverlap: z
        .number()
        .gt(0, 'synthesis.contamination.textOverlap must be in (0, 1]')
        .max(1, 'synthesis.contamination.textOverlap must be in (0, 1]')
        .default(0.5),
      sameCallsAndState: z.boolean().default(true),
    })
    .prefault({}),
  /**
   * The longest a synthesis child workflow may run (Temporal's workflow execution timeout): a
   * child whose workflow task fails in a loop (a non-determinism error after a deploy) or that
   * hangs is ended then, its slot freed and CandidateRejected recorded (synthesis-timed-out).
   */
  executionTimeoutSeconds: z
    .number()
    .int('synthesis.executionTimeoutSeconds must be a whole number of seconds')
    .min(10, 'synthesis.executionTimeoutSeconds must be >= 10')
    .default(7200),
  /** Classify-and-rewrite refinements of a rejected candidate before it is dropped. */
  maxRefinements: z
    .number()
    .int('synthesis.maxRefinements must be a whole number')
    .min(0, 'synthesis.maxRefinements must be >= 0')
    .default(1),
  /** User turns of a candidate. */
  turns: range('synthesis.turns', 2, 5, 1).prefault({}),
  /**
   * Ground-truth calls per turn (turns deliberately left empty by miss_func/miss_param excepted);
   * the cap rises to the seed's largest turn for its children (domain/structure.ts).
   */
  callsPerTurn: range('synthesis.callsPerTurn', 1, 3, 0).prefault({}),
  /** How far a candidate's structure may be from its seed's before it is rejected (structure-mismatch). */
  structureTolerance: z
    .strictObject({
      turns: z
        .number()
        .int('synthesis.structureTolerance.turns must be a whole number of turns')
        .min(0, 'synthesis.structureTolerance.turns must be >= 0')
        .default(2),
      meanCallsPerTurn: z
        .number()
        .min(0, 'synthesis.structureTolerance.meanCallsPerTurn must be >= 0')
        .default(1.5),
    })
    .prefault({}),
  /** Longest string (in Unicode code points) anywhere in initial_config and in call arguments. */
  maxStringLength: z
    .number()
    .int('synthesis.maxStringLength must be a whole number of characters')
    .min(1, 'synthesis.maxStringLength must be >= 1')
    .default(200),
  /** Most items of a list anywhere in initial_config and in call arguments. */
  maxListItems: z
    .number()
    .int('synthesis.maxListItems must be a whole number')
    .min(0, 'synthesis.maxListItems must be >= 0')
    .default(5),
  /**
   * Augment stage (domain/augment.ts): miss_func / miss_param variants of a validated candidate.
   * Per kind: true for every seed's children, false for none, unset for the children of seeds of
   * that category only.
   */
  augment: z
    .strictObject({
      missingFunction: z.boolean().optional(),
      missingParameter: z.boolean().optional(),
    })
    .prefault({}),
});

/** Name of an operator's generator endpoint (the worker's configuration, never the campaign's). */
export const GENERATOR_ENDPOINT_NAME = /^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$/;
export const DEFAULT_GENERATOR_ENDPOINT = 'default';

/**
 * Generator settings a campaign may not carry: where to send requests and with which
 * credentials are the operator's (the worker's named endpoints), and a campaign config is
 * recorded in the hash-chained log, Temporal histories and exports.
 */
const OPERATOR_ONLY = new Set([
  'baseurl',
  'url',
  'endpointurl',
  'apikey',
  'apikeyenv',
  'key',
  'headers',
  'header',
  'authorization',
  'token',
  'bearer',
  'password',
  'secret',
]);
const operatorOnly = (key: string) => OPERATOR_ONLY.has(key.toLowerCase().replace(/[_-]/g, ''));

/**
 * The generator and judge: a named endpoint of the operator (its URL, key and headers are the
 * worker's configuration) and the non-secret knobs. Loose: other knobs pass through to the
 * client. Operator-only keys of configs recorded before endpoints existed are dropped when read.
 */
export const GeneratorConfigSchema = z
  .object({
    endpoint: z
      .string()
      .regex(
        GENERATOR_ENDPOINT_NAME,
        'generator.endpoint must be an endpoint name (letters, digits, ".", "_", "-"; at most 64)',
      )
      .default(DEFAULT_GENERATOR_ENDPOINT),
    model: z.string().min(1, 'generator.model must not be empty').default('Qwen/Qwen3-32B'),
    judgeModel: z.string().min(1, 'generator.judgeModel must not be empty').default('Qwen/Qwen3-32B'),
    temperature: z
      .number()
      .min(0, 'generator.temperature must be >= 0')
      .max(2, 'generator.temperature must be <= 2')
      .default(1.0),
    topP: z
      .number()
      .gt(0, 'generator.topP must be in (0, 1]')
      .max(1, 'generator.topP must be in (0, 1]')
      .default(0.7),
  })
  .passthrough()
  .transform((g) => Object.fromEntries(Object.entries(g).filter(([k]) => !operatorOnly(k))) as typeof g);

/** What the gateway accepts from the trainer beyond the reward limits. */
export const IngestionConfigSchema = z.strictObject({
  /**
   * A batch's step may be at most this far past the campaign's last closed step (0 before any):
   * a step far ahead would make every later group of its tasks stale.
   */
  maxStepsAhead: z
    .number()
    .int('ingestion.maxStepsAhead must be a whole number of steps')
    .min(1, 'ingestion.maxStepsAhead must be >= 1 (1: only the step after the last closed one)')
    .default(16),
  /**
   * A step the trainer never closed while later ones closed (a lost report, a trainer that
   * skipped it): `move-on` records StepSkipped once `afterSteps` later steps have closed and plans
   * on; `wait` waits for it (the gateway refuses a step behind the last closed one, so only a
   * reconfiguration to move-on ends that wait). Either way status and doctor name the step.
   */
  /**
   * Rewards for a task that was never in the campaign's pool (a typo, another dataset's id): `refuse`
   * (what new campaigns record) answers 422 naming it, `dead-letter` accepts the batch and the
   * aggregator dead-letters such groups as unknown-task, `accept` (campaigns recorded before)
   * counts them. A BFCL id the pool delivered (domain/ids.ts bfclTaskId) is taken as its task.
   */
  unknownTasks: z.enum(['refuse', 'dead-letter', 'accept']).default('accept'),
  missingSteps: z
    .strictObject({
      policy: z.enum(['move-on', 'wait']).default('move-on'),
      afterSteps: z
        .number()
        .int('ingestion.missingSteps.afterSteps must be a whole number of steps')
        .min(1, 'ingestion.missingSteps.afterSteps must be >= 1')
        .default(3),
    })
    .prefault({}),
});

/**
 * Switches for the paper's comparisons on the live pipeline (all on: the method as published).
 * Recorded in CampaignStarted with the rest of the config, so a campaign says what it ablated.
 */
export const AblationConfigSchema = z.strictObject({
  /**
   * The coherence rewrite; off: each turn's user message is written on its own from that turn's
   * calls alone (prompts/turn-query.v1.md), with no view of the other turns, narrative or seed.
   */
  rewrite: z.boolean().default(true),
  /** The LLM quality judge; off: a candidate that passes the gates and re-executes is validated. */
  judge: z.boolean().default(true),
  /** `boundary` (φ, the method) or `random`: seeds drawn uniformly among observed members, seeded. */
  selection: z.enum(['boundary', 'random']).default('boundary'),
  /** Seed of the `random` selection's draws (each step's draw depends only on it and the step). */
  randomSeed: z.number().int('ablation.randomSeed must be a whole number').default(0),
  /** Retirement by rule (mastered, burn-in); off: tasks stay until pruned or retired by hand. */
  retirement: z.boolean().default(true),
  /** Injection (and pruning); off: validated candidates only wait in the queue. */
  injection: z.boolean().default(true),
  /**
   * `dynamic` (the method) or `static`, the paper's static-pool ablation: synthesis from the
   * initial boundary once (at the first step any seed is selectable, every eligible boundary seed
   * up to pool.generatedCap), its candidates injected as they come, then no further selection or
   * retirement: once the initial wave is in, the pool no longer changes.
   */
  pool: z.enum(['dynamic', 'static']).default('dynamic'),
});

/** Which human seeds a campaign starts from: BFCL multi-turn tasks per category (executor/). */
export const SeedsConfigSchema = z.strictObject({
  /** Seeds per category, the first ones of each (the paper: 100 of each of the four). */
  perCategory: z.number().int('seeds.perCategory must be a whole number').min(1).max(10_000).default(100),
  /** The categories to seed from (default: all four). */
  categories: z.array(z.enum(SEED_CATEGORIES)).min(1).optional(),
});
export type SeedsConfig = z.infer<typeof SeedsConfigSchema>;

const EVALUATION_KEYS = [
  'onCheckpoint',
  'baseUrl',
  'model',
  'apiKeyEnv',
  'tasks',
  'categories',
  'perCategory',
  'concurrency',
  'maxStepsPerTurn',
  'endpointAttempts',
] as const;

const positive = (what: string) =>
  z.number().int(`evaluation.${what} must be a whole number`).min(1, `evaluation.${what} must be >= 1`);

/** A template's placeholders must be the listed ones. */
const placeholders = (what: string, allowed: readonly string[]) => (v: string, ctx: z.RefinementCtx) => {
  for (const name of unknownPlaceholders(v, allowed))
    ctx.addIssue({
      code: 'custom',
      message: `evaluation.${what} may hold ${allowed.map((a) => `{${a}}`).join(', ')}; {${name}} is none of them`,
    });
};

/**
 * Evaluation of every recorded checkpoint, started by the campaign workflow (`rods eval run`'s
 * settings, the same evaluation id): an endpoint serving the checkpoint, whose URL and model may
 * name it ({checkpoint}, {step}, {run}; {category} in the URL as for `rods eval run`). The URL is
 * recorded (EvaluationStarted records it too), so it may hold no credentials: a key is named by
 * the worker's environment variable (apiKeyEnv), never given.
 */
export const EvaluationConfigSchema = z
  .strictObject(
    {
      /** Start an evaluation for each checkpoint the campaign records (false keeps the settings, idle). */
      onCheckpoint: z.boolean().default(true),
      baseUrl: z
        .string()
        .superRefine(placeholders('baseUrl', [...CHECKPOINT_PLACEHOLDERS, 'category']))
        .superRefine((v, ctx) => {
          const sample = fillCheckpoint(v, { checkpointId: 'c', trainerStep: 1, runId: 'r' }).replaceAll(
            '{category}',
            'base',
          );
          const issue = unknownPlaceholders(v, [...CHECKPOINT_PLACEHOLDERS, 'category']).length
            ? undefined
            : endpointUrlIssue(sample);
          if (issue)
            ctx.addIssue({ code: 'custom', message: `evaluation.baseUrl ${JSON.stringify(v)} ${issue}` });
        }),
      model: z
        .string()
        .min(1, 'evaluation.model must not be empty')
        .superRefine(placeholders('model', CHECKPOINT_PLACEHOLDERS)),
      apiKeyEnv: z
        .string()
        .regex(
          /^[A-Za-z_][A-Za-z0-9_]*$/,
          "evaluation.apiKeyEnv must be the name of the worker's environment variable holding the key (letters, digits, _), not the key",
        )
        .optional(),
      /** Explicit BFCL multi-turn task ids instead of the held-out split. */
      tasks: z
        .array(
          z.string().superRefine((id, ctx) => {
            if (!multiTurnTask(id))
              ctx.addIssue({
                code: 'custom',
                message: `evaluation.tasks: ${JSON.stringify(id)} is not a BFCL multi-turn task id (multi_turn_<category>_<n>)`,
              });
          }),
        )
        .min(1, 'evaluation.tasks must name at least one task (leave it out for the held-out split)')
        .optional(),
      categories: z.array(z.enum(SEED_CATEGORIES)).min(1).optional(),
      perCategory: positive('perCategory').optional(),
      concurrency: positive('concurrency').default(1),
      maxStepsPerTurn: positive('maxStepsPerTurn').optional(),
      endpointAttempts: positive('endpointAttempts').default(5),
    },
    {
      error: (iss) =>
        iss.code === 'unrecognized_keys'
          ? `${iss.keys.map((k) => JSON.stringify(k)).join(', ')} is not an evaluation setting (${EVALUATION_KEYS.join(', ')}); an API key is never one: name the worker's environment variable in apiKeyEnv`
          : undefined,
    },
  )
  .refine((e) => !(e.tasks && (e.perCategory !== undefined || e.categories)), {
    message: 'evaluation.tasks names the tasks: give it without perCategory and categories',
    path: ['tasks'],
  });
export type EvaluationConfig = z.infer<typeof EvaluationConfigSchema>;

export const CampaignConfigSchema = z
  .object({
    /** Rollouts per task (GRPO group size K). */
    rolloutsPerTask: z.number().int().min(1).max(1024).default(16),
    detector: DetectorConfigSchema.prefault({}),
    rewards: RewardLimitsSchema.prefault({}),
    ingestion: IngestionConfigSchema.prefault({}),
    pool: PoolConfigSchema.prefault({}),
    selection: SelectionConfigSchema.prefault({}),
    synthesis: SynthesisConfigSchema.prefault({}),
    generator: GeneratorConfigSchema.prefault({}),
    ablation: AblationConfigSchema.prefault({}),
    /** Absent: 100 seeds of each category. */
    seeds: SeedsConfigSchema.optional(),
    /** Absent: checkpoints are evaluated only by `rods eval run`. */
    evaluation: EvaluationConfigSchema.optional(),
  })
  .passthrough()
  .superRefine((c, ctx) => {
    const quotas = Object.values(c.selection.perCategoryQuota);
    const sum = quotas.reduce((a, b) => a + b, 0);
    if (sum > c.selection.budgetPerStep) {
      ctx.addIssue({
        code: 'custom',
        path: ['selection', 'perCategoryQuota'],
        message: `per-category quotas (sum ${sum}) exceed the per-step budget M = ${c.selection.budgetPerStep}; lower a quota or raise budgetPerStep`,
      });
    }
    if (c.rolloutsPerTask > c.rewards.maxRollouts) {
      ctx.addIssue({
        code: 'custom',
        path: ['rewards', 'maxRollouts'],
        message: `rewards.maxRollouts (${c.rewards.maxRollouts}) is below rolloutsPerTask (${c.rolloutsPerTask}): every group would be rejected; raise maxRollouts or lower rolloutsPerTask`,
      });
    }
    if (c.pool.retireMasteredAbove < c.detector.high) {
      ctx.addIssue({
        code: 'custom',
        path: ['pool', 'retireMasteredAbove'],
        message: `pool.retireMasteredAbove (${c.pool.retireMasteredAbove}) is below detector.high (${c.detector.high}): boundary tasks would retire as mastered; raise retireMasteredAbove or lower detector.high`,
      });
    }
    if (c.pool.burnInFloor > c.detector.low) {
      ctx.addIssue({
        code: 'custom',
        path: ['pool', 'burnInFloor'],
        message: `pool.burnInFloor (${c.pool.burnInFloor}) is above detector.low (${c.detector.low}): boundary generated tasks would retire in burn-in; lower burnInFloor or raise detector.low`,
      });
    }
  });

export type CampaignConfigInput = z.input<typeof CampaignConfigSchema>;
export type CampaignConfig = z.output<typeof CampaignConfigSchema>;
export type PoolConfig = CampaignConfig['pool'];
export type SelectionConfig = CampaignConfig['selection'];
export type SynthesisConfig = CampaignConfig['synthesis'];
export type GeneratorConfig = CampaignConfig['generator'];
export type IngestionConfig = CampaignConfig['ingestion'];

export class CampaignConfigError extends Error {
  override name = 'CampaignConfigError';
  constructor(readonly issues: string[]) {
    super(`invalid campaign config: ${issues.join('; ')}`);
  }
}

/** Parses and validates a campaign config (missing values take their defaults); throws CampaignConfigError. */
export function parseCampaignConfig(input: unknown): CampaignConfig {
  const r = CampaignConfigSchema.safeParse(input ?? {});
  if (!r.success) throw new CampaignConfigError(issueLines(r.error));
  return r.data;
}

/**
 * Where a config given for a new campaign (or a reconfiguration) carries what only the operator
 * configures: a URL, key or header of the generator. Empty when it carries none. Configs already
 * recorded stay readable (parseCampaignConfig drops these keys), so this runs where configs enter.
 */
export function operatorOnlyIssues(input: unknown): { path: string[]; message: string }[] {
  if (!isPlainObject(input) || !isPlainObject(input.generator)) return [];
  return Object.keys(input.generator)
    .filter(operatorOnly)
    .sort()
    .map((k) => ({
      path: ['generator', k],
      message: `generator.${k} is not a campaign setting: generator URLs, API keys and headers are the operator's, configured on the worker as named endpoints (RODS_GENERATOR_ENDPOINTS_FILE, RODS_GENERATOR_BASE_URL); name one with generator.endpoint`,
    }));
}

/** A campaign config as it may enter: valid, and free of operator-only generator settings. */
export const NewCampaignConfigSchema = z.unknown().superRefine((v, ctx) => {
  for (const i of operatorOnlyIssues(v)) ctx.addIssue({ code: 'custom', path: i.path, message: i.message });
  const r = CampaignConfigSchema.safeParse(v ?? {});
  if (!r.success)
    for (const i of r.error.issues) ctx.addIssue({ code: 'custom', path: i.path, message: i.message });
});

/**
 * The settings a campaign created now records explicitly where its config leaves them out, while
 * the schema's defaults stay what campaigns recorded before meant (so they replay as they ran).
 */
export const NEW_CAMPAIGN_SETTINGS = {
  rewards: { lateGroups: 'fold' },
  ingestion: { unknownTasks: 'refuse' },
} as const;

/** `input` with NEW_CAMPAIGN_SETTINGS filled in where it does not say. */
export function withNewCampaignSettings(input: unknown): Record<string, unknown> {
  const c = isPlainObject(input) ? { ...input } : {};
  for (const [section, values] of Object.entries(NEW_CAMPAIGN_SETTINGS)) {
    const given = isPlainObject(c[section]) ? (c[section] as Record<string, unknown>) : {};
    c[section] = { ...values, ...given };
  }
  return c;
}

/** Refuses operator-only generator settings in a config entering the system (CampaignConfigError). */
export function refuseOperatorOnly(input: unknown): void {
  const secret = operatorOnlyIssues(input);
  if (secret.length) throw new CampaignConfigError(secret.map((i) => `${i.path.join('.')}: ${i.message}`));
}

/** parseCampaignConfig for a config entering the system (operatorOnlyIssues refused); throws CampaignConfigError. */
export function parseNewCampaignConfig(input: unknown): CampaignConfig {
  refuseOperatorOnly(input);
  return parseCampaignConfig(input);
}

/**
 * A recorded config (object or its JSON text) fit to show: operator-only generator settings of
 * configs recorded before endpoints existed are left out. Anything else is returned as it is.
 */
export function redactCampaignConfig<T>(config: T): T {
  if (typeof config === 'string') {
    try {
      const parsed: unknown = JSON.parse(config);
      return (isPlainObject(parsed) ? JSON.stringify(redactCampaignConfig(parsed)) : config) as T;
    } catch {
      return config;
    }
  }
  if (!isPlainObject(config) || !isPlainObject(config.generator)) return config;
  const generator = Object.fromEntries(Object.entries(config.generator).filter(([k]) => !operatorOnly(k)));
  return { ...config, generator } as T;
}

/**
 * The config in its input spelling (window and cadence as their spec strings), a plain JSON
 * value: parseCampaignConfig(campaignConfigToJson(c)) deep-equals c. This is what events carry.
 */
export function campaignConfigToJson(c: CampaignConfig): Record<string, unknown> {
  return JSON.parse(
    JSON.stringify({
      ...c,
      detector: { ...c.detector, window: windowSpec(c.detector.window as DetectorWindow) },
      pool: { ...c.pool, injectionCadence: cadenceSpec(c.pool.injectionCadence) },
    }),
  ) as Record<string, unknown>;
}

/** Injection period in steps: pool.epochSteps for `epoch`, N for `steps:N`. */
export function injectionPeriod(c: Pick<CampaignConfig, 'pool'>): number {
  const cad = c.pool.injectionCadence;
  return cad.kind === 'epoch' ? c.pool.epochSteps : cad.every;
}

/**
 * Whether step s is an injection boundary: s is a positive multiple of the injection period
 * (with steps counted from 1, the last step of each epoch; step 0 never is).
 */
export function isInjectionBoundary(step: number, c: Pick<CampaignConfig, 'pool'>): boolean {
  return Number.isSafeInteger(step) && step > 0 && step % injectionPeriod(c) === 0;
}

// ---------------------------------------------------------------------------------------------
// Reconfiguration of a running campaign

function isPlainObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

/** Dotted paths of the leaves that differ between two JSON values (sorted). */
export function changedPaths(a: unknown, b: unknown, prefix = ''): string[] {
  if (isPlainObject(a) && isPlainObject(b)) {
    const keys = [...new Set([...Object.keys(a), ...Object.keys(b)])].sort();
    return keys.flatMap((k) => {
      const p = prefix ? `${prefix}.${k}` : k;
      const inA = Object.hasOwn(a, k);
      const inB = Object.hasOwn(b, k);
      if (inA !== inB) return [p];
      return changedPaths(a[k], b[k], p);
    });
  }
  return JSON.stringify(a) === JSON.stringify(b) ? [] : [prefix || '(root)'];
}

/** Config values that cannot change on a running campaign, and why. */
const FIXED_FOR_A_CAMPAIGN: readonly { path: string; why: string }[] = [
  {
    path: 'rolloutsPerTask',
    why: "the trainer's GRPO group size is fixed for a campaign and every task's statistics are counted in groups of it",
  },
  {
    path: 'detector.window',
    why: "every task's detector signal was computed with the current window; a new window would mix two statistics in one pool",
  },
  {
    path: 'detector.ewmaAlpha',
    why: "every task's EWMA was accumulated with the current alpha; a new alpha would mix two statistics in one pool",
  },
];

export type Reconfiguration =
  /** `raw`: the config to record, the settings of NEW_CAMPAIGN_SETTINGS it left out carried over. */
  | { ok: true; config: CampaignConfig; raw: Record<string, unknown>; changedKeys: string[] }
  | { ok: false; message: string; issues: string[] };

/**
 * `next` with the NEW_CAMPAIGN_SETTINGS it leaves out taken from `current`: a reconfiguration
 * that does not mention them keeps them, whatever the campaign recorded (and a campaign recorded
 * before them keeps its old behaviour).
 */
function carrySettings(current: CampaignConfig, next: unknown): Record<string, unknown> {
  const c: Record<string, unknown> = isPlainObject(next) ? { ...next } : {};
  const keep = {
    rewards: { lateGroups: current.rewards.lateGroups },
    ingestion: { unknownTasks: current.ingestion.unknownTasks },
  };
  for (const [section, values] of Object.entries(keep)) {
    const given = isPlainObject(c[section]) ? (c[section] as Record<string, unknown>) : {};
    c[section] = { ...values, ...given };
  }
  return c;
}

/**
 * Validates a new configuration for a running campaign: it must be a valid config, and it may not
 * change what cannot apply mid-campaign (rolloutsPerTask, detector.window, detector.ewmaAlpha).
 * Everything else (thresholds, pool, selection, synthesis, generator knobs) applies from the next
 * decision on. `next` is a complete config: values it leaves out take their defaults, not the
 * current values. changedKeys are the dotted paths that changed (for CampaignReconfigured).
 */
export function validateReconfiguration(current: CampaignConfig, given: unknown): Reconfiguration {
  const next = carrySettings(current, given);
  let parsed: CampaignConfig;
  try {
    parsed = parseCampaignConfig(next);
  } catch (e) {
    const issues = e instanceof CampaignConfigError ? e.issues : [(e as Error).message];
    return { ok: false, message: `invalid campaign config: ${issues.join('; ')}`, issues };
  }
  const changedKeys = changedPaths(campaignConfigToJson(current), campaignConfigToJson(parsed));
  const issues: string[] = [];
  for (const fixed of FIXED_FOR_A_CAMPAIGN) {
    if (changedKeys.some((k) => k === fixed.path || k.startsWith(`${fixed.path}.`))) {
      const before = JSON.stringify(readPath(campaignConfigToJson(current), fixed.path));
      const after = JSON.stringify(readPath(campaignConfigToJson(parsed), fixed.path));
      issues.push(
        `${fixed.path} cannot change on a running campaign (${before} -> ${after}): ${fixed.why}; keep ${before}, or start a new campaign (or try it with what-if replay)`,
      );
    }
  }
  if (issues.length > 0) {
    return { ok: false, message: `reconfiguration refused: ${issues.join('; ')}`, issues };
  }
  return { ok: true, config: parsed, raw: next, changedKeys };
}

function readPath(v: unknown, path: string): unknown {
  let cur = v;
  for (const k of path.split('.')) {
    if (!isPlainObject(cur) || !Object.hasOwn(cur, k)) return undefined;
    cur = cur[k];
  }
  return cur;
}
