// Request schemas of the gateway (zod): the single source of validation and of the request
// parts of the OpenAPI document (entry/gateway/openapi.ts).
import { z } from 'zod';
import { campaignConfigSizeError, MAX_ROLLOUTS_LIMIT } from '../../domain/campaign-config.js';
import { unstorableCharacter } from '../../domain/storable-text.js';
import { LIMIT_ENV } from './request-limits.js';

export { unstorableCharacter };

export const STORABLE_TEXT = 'no control characters (U+0000-U+001F, U+007F) and no lone surrogates';

/** A string that is stored (ids, versions, names): refused before any other check of it. */
const storable = (what: string) =>
  z.string().superRefine((s, ctx) => {
    const why = unstorableCharacter(s);
    if (why) ctx.addIssue({ code: 'custom', message: `${what} ${why}`, continue: false });
  });

/** Every string key and value of a JSON value that PostgreSQL can store (jsonb); no recursion. */
function jsonStringIssues(root: unknown, ctx: z.RefinementCtx): void {
  const todo: [unknown, (string | number)[]][] = [[root, []]];
  for (let next = todo.pop(); next; next = todo.pop()) {
    const [v, path] = next;
    if (typeof v === 'string') {
      const why = unstorableCharacter(v, { controls: false });
      if (why) ctx.addIssue({ code: 'custom', path, message: `the string ${why}` });
    } else if (Array.isArray(v)) {
      for (let i = v.length - 1; i >= 0; i--) todo.push([v[i], [...path, i]]);
    } else if (v !== null && typeof v === 'object') {
      for (const [k, x] of Object.entries(v).reverse()) {
        const why = unstorableCharacter(k, { controls: false });
        if (why) ctx.addIssue({ code: 'custom', path: [...path, k], message: `the key ${why}` });
        else todo.push([x, [...path, k]]);
      }
    }
  }
}

export const ID_PATTERN = /^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$/;
const id = (what: string) =>
  storable(what).regex(
    ID_PATTERN,
    `${what}: 1-100 characters of letters, digits, . _ - (starting with a letter or digit)`,
  );

/** Free text that is stored (task ids, policy versions, names): 1-200 characters, storable. */
const text = (what: string) =>
  storable(what)
    .min(1, `${what} must not be empty`)
    .max(200, `${what}: at most 200 characters`)
    .describe(`${what}: 1-200 characters, ${STORABLE_TEXT}`);

export const CampaignCreate = z
  .object({
    campaignId: id('campaign id'),
    name: text('name').optional(),
    config: z
      .record(z.string(), z.unknown())
      .superRefine((c, ctx) => {
        jsonStringIssues(c, ctx);
        const tooLarge = campaignConfigSizeError(c);
        if (tooLarge) ctx.addIssue({ code: 'custom', message: tooLarge });
      })
      .describe(
        'the campaign config (domain/campaign-config.ts); its strings hold no U+0000 or lone surrogate; at most MAX_CAMPAIGN_CONFIG_BYTES (256 KiB) of canonical JSON',
      ),
    untilStep: z
      .int()
      .min(0)
      .optional()
      .describe('stop after this training step (default: run until stopped)'),
  })
  .strict();
export type CampaignCreate = z.infer<typeof CampaignCreate>;

export const CampaignParams = z.object({ id: id('campaign id') });

export const StepParams = z.object({
  id: id('campaign id'),
  step: z
    .string()
    .regex(/^\d{1,15}$/, 'step must be a non-negative integer')
    .transform((s) => Number(s)),
});

const reward = z
  .number({ error: 'reward must be a number in [0,1]' })
  .min(0, 'reward must be in [0,1]')
  .max(1, 'reward must be in [0,1]');

export const RolloutGroup = z
  .object({
    taskId: text('task id'),
    // The campaign's rewards.maxRollouts is checked against the campaign (entry/gateway/ingest.ts).
    rewards: z
      .array(reward)
      .min(1, 'a group has at least one reward')
      .max(MAX_ROLLOUTS_LIMIT, `a group has at most ${MAX_ROLLOUTS_LIMIT} rewards`)
      .describe("the group's rewards: at most the campaign's rewards.maxRollouts (default 1024)"),
  })
  .strict();

export const RolloutBatch = z
  .object({
    batchId: id('batch id'),
    policyVersion: text('policy version'),
    groups: z.array(RolloutGroup).max(100_000),
    close: z
      .boolean()
      .optional()
      .describe('close the step after this batch (StepClosed with the step total)'),
  })
  .strict()
  .superRefine((b, ctx) => {
    if (b.groups.length === 0 && !b.close)
      ctx.addIssue({
        code: 'custom',
        path: ['groups'],
        message: 'a batch that does not close its step needs at least one group',
      });
    const first = new Map<string, number>();
    b.groups.forEach((g, i) => {
      const j = first.get(g.taskId);
      if (j !== undefined)
        ctx.addIssue({
          code: 'custom',
          path: ['groups', i, 'taskId'],
          message: `duplicate task id in the batch (first at groups[${j}])`,
        });
      else first.set(g.taskId, i);
    });
  })
  // The first rule above as OpenAPI 3.0 can state it (entry/gateway/openapi.ts): a batch closes
  // its step, or holds a group.
  .meta({
    description:
      'a batch that does not close its step (close absent or false) holds at least one group; a task id appears once in a batch',
    anyOf: [
      { required: ['close'], properties: { close: { enum: [true] } } },
      { properties: { groups: { minItems: 1 } } },
    ],
  });
export type RolloutBatch = z.infer<typeof RolloutBatch>;

/** Tasks a retrained step may name (a step's batch is one generation batch's prompts). */
export const MAX_RETRAINED_TASKS = 100_000;

/** The largest step a path or a report may name (15 digits: every count of steps stays a safe integer). */
export const MAX_STEP = 999_999_999_999_999;

const checkpointStep = (what: string) =>
  z
    .int(`${what} must be an integer`)
    .min(1, `${what} must be >= 1`)
    .max(MAX_STEP, `${what} must be <= ${MAX_STEP}`);

export const CheckpointReport = z
  .object({
    checkpointId: id('checkpoint id'),
    runId: id('run id').describe('the training run (one process lifetime) that saved the checkpoint'),
    step: checkpointStep('step').describe("the trainer's global step the checkpoint holds"),
    resumedFrom: id('resumedFrom')
      .nullable()
      .optional()
      .describe(
        "the checkpoint id this run resumed from (every checkpoint of a resumed run carries it); recorded before this one, at a step at most this one's",
      ),
    digest: z
      .string()
      .regex(/^sha256:[0-9a-f]{64}$/, 'digest: sha256:<64 lower-case hex digits>')
      .nullable()
      .optional(),
    retrainedSteps: z
      .array(
        z
          .object({
            step: checkpointStep('a retrained step').describe(
              "at most the checkpoint's step, and after the step of the checkpoint the run resumed from",
            ),
            groups: z
              .array(
                z
                  .object({
                    taskId: text('task id'),
                    rollouts: z
                      .int('rollouts must be an integer')
                      .min(1, 'rollouts must be >= 1')
                      .max(MAX_ROLLOUTS_LIMIT, `rollouts must be <= ${MAX_ROLLOUTS_LIMIT}`),
                  })
                  .strict(),
              )
              .max(MAX_RETRAINED_TASKS)
              .describe('the tasks the run trained at the step, each once'),
          })
          .strict(),
      )
      .max(100_000)
      .default([])
      .describe(
        "steps this run trained again that an earlier run had reported, since this run's previous checkpoint, with the tasks and rollouts this run trained at them: ascending, each step once, each at most the checkpoint's step",
      ),
  })
  .strict()
  .superRefine((c, ctx) => {
    let previous = 0;
    c.retrainedSteps.forEach((r, i) => {
      if (r.step <= previous)
        ctx.addIssue({
          code: 'custom',
          path: ['retrainedSteps', i, 'step'],
          message: 'steps must ascend, each once',
        });
      if (r.step > c.step)
        ctx.addIssue({
          code: 'custom',
          path: ['retrainedSteps', i, 'step'],
          message: `a retrained step is at most the checkpoint's step ${c.step}`,
        });
      previous = r.step;
      // A task trained once per step: a repeat would count its rollouts twice.
      const first = new Map<string, number>();
      r.groups.forEach((g, j) => {
        const k = first.get(g.taskId);
        if (k !== undefined)
          ctx.addIssue({
            code: 'custom',
            path: ['retrainedSteps', i, 'groups', j, 'taskId'],
            message: `task ${JSON.stringify(g.taskId)} is named twice in the step (first at groups[${k}])`,
          });
        else first.set(g.taskId, j);
      });
    });
  });
export type CheckpointReport = z.infer<typeof CheckpointReport>;

export const MAX_WAIT_SECONDS = 300;

export const PoolQuery = z.object({
  wait: z.coerce
    .number({ error: 'wait must be a number of seconds' })
    .min(0, 'wait must be >= 0')
    .max(MAX_WAIT_SECONDS, `wait must be <= ${MAX_WAIT_SECONDS}`)
    .optional(),
});

/** The longest `seed` of `GET .../batch`. */
export const MAX_SEED_LENGTH = 200;

/**
 * The query of `GET .../batch`, `n` up to the gateway's cap (RODS_GATEWAY_MAX_BATCH_N, at most
 * MAX_BATCH_N_LIMIT): the number its OpenAPI document gives (entry/gateway/openapi.ts).
 */
export function batchQuery(maxN: number) {
  const range = `n must be an integer in [1, ${maxN}] (${LIMIT_ENV.maxBatchN})`;
  return z.object({
    n: z
      .string({ error: 'n is required' })
      .regex(/^\d{1,6}$/, range)
      .transform(Number)
      .pipe(z.number().min(1, range).max(maxN, range)),
    seed: z
      .string()
      .min(1, 'seed must not be empty')
      .max(MAX_SEED_LENGTH, `seed: at most ${MAX_SEED_LENGTH} characters`)
      .optional(),
  });
}

/** `GET /v1/campaigns/:id?holds=false` leaves out what holds the campaign (cheap polling). */
export const CampaignStatusQuery = z.object({
  holds: z.enum(['true', 'false'], { error: 'holds must be true or false' }).optional(),
});
