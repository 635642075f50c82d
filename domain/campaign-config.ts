// A campaign's configuration. Every number of the method is a config value; the defaults are
// the paper's. The workflows issue extends this with the synthesis and pool knobs.
import { z } from 'zod';
import { DetectorConfigSchema } from './band.js';
import { DEFAULT_REWARD_LIMITS } from './reward-group.js';

export const RewardLimitsSchema = z.object({
  maxRollouts: z.number().int().min(1).max(1_000_000).default(DEFAULT_REWARD_LIMITS.maxRollouts),
  staleStepTolerance: z.number().int().min(0).default(DEFAULT_REWARD_LIMITS.staleStepTolerance),
});

export const CampaignConfigSchema = z
  .object({
    /** Rollouts per task (GRPO group size K). */
    rolloutsPerTask: z.number().int().min(1).max(1024).default(16),
    detector: DetectorConfigSchema.prefault({}),
    rewards: RewardLimitsSchema.prefault({}),
  })
  .passthrough();

export type CampaignConfigInput = z.input<typeof CampaignConfigSchema>;
export type CampaignConfig = z.output<typeof CampaignConfigSchema>;

export function parseCampaignConfig(input: unknown): CampaignConfig {
  const r = CampaignConfigSchema.safeParse(input ?? {});
  if (!r.success) {
    throw new Error(
      `invalid campaign config: ${r.error.issues.map((i) => `${i.path.join('.') || '(root)'}: ${i.message}`).join('; ')}`,
    );
  }
  return r.data;
}
