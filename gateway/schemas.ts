// Request schemas of the gateway (zod): the single source of validation and of the request
// parts of the OpenAPI document (gateway/openapi.ts).
import { z } from 'zod';

export const ID_PATTERN = /^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$/;
const id = (what: string) =>
  z
    .string()
    .regex(
      ID_PATTERN,
      `${what}: 1-100 characters of letters, digits, . _ - (starting with a letter or digit)`,
    );

export const CampaignCreate = z
  .object({
    campaignId: id('campaign id'),
    name: z.string().min(1).max(200).optional(),
    config: z.record(z.string(), z.unknown()).describe('the campaign config (domain/campaign-config.ts)'),
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
    taskId: z.string().min(1).max(200),
    rewards: z.array(reward).min(1, 'a group has at least one reward').max(4096),
  })
  .strict();

export const RolloutBatch = z
  .object({
    batchId: id('batch id'),
    policyVersion: z.string().min(1).max(200),
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
  });
export type RolloutBatch = z.infer<typeof RolloutBatch>;

export const MAX_WAIT_SECONDS = 300;

export const PoolQuery = z.object({
  wait: z.coerce
    .number({ error: 'wait must be a number of seconds' })
    .min(0, 'wait must be >= 0')
    .max(MAX_WAIT_SECONDS, `wait must be <= ${MAX_WAIT_SECONDS}`)
    .optional(),
});

export const BatchQuery = z.object({
  n: z
    .string({ error: 'n is required' })
    .regex(/^\d{1,6}$/, 'n must be an integer in [1, 100000]')
    .transform(Number)
    .pipe(
      z
        .number()
        .min(1, 'n must be an integer in [1, 100000]')
        .max(100_000, 'n must be an integer in [1, 100000]'),
    ),
  seed: z.string().min(1).max(200).optional(),
});
