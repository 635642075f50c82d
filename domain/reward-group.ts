// What makes a reward group acceptable to the statistics. Anything rejected here goes to the
// dead-letter topic with its reason and never reaches a task's state.

export interface RewardLimits {
  /** Most rollouts a group may carry. */
  maxRollouts: number;
  /** How many steps older than the task's last step a group may be (under `reject-stale`). */
  staleStepTolerance: number;
  /**
   * `fold`: a group older than its task's last step is counted (campaign-config.ts rewards.lateGroups);
   * `reject-stale` (the default here, what campaigns recorded before meant): past the tolerance, refused.
   */
  lateGroups?: 'fold' | 'reject-stale';
}

export const DEFAULT_REWARD_LIMITS: Readonly<RewardLimits> = Object.freeze({
  maxRollouts: 1024,
  staleStepTolerance: 2,
});

export type RejectionCode =
  | 'empty-rewards'
  | 'too-many-rollouts'
  | 'non-finite-reward'
  | 'reward-out-of-range'
  | 'stale-step'
  | 'bad-step'
  | 'unknown-campaign'
  | 'unknown-task';

export interface Rejection {
  code: RejectionCode;
  reason: string;
}

/** Null when the group may be counted; otherwise the first reason it may not. */
export function checkGroup(
  rewards: readonly number[],
  step: number,
  lastStep: number | undefined,
  limits: RewardLimits = DEFAULT_REWARD_LIMITS,
): Rejection | null {
  if (!Number.isSafeInteger(step) || step < 0)
    return { code: 'bad-step', reason: `step ${step} is not a non-negative integer` };
  if (rewards.length === 0) return { code: 'empty-rewards', reason: 'the rewards array is empty' };
  if (rewards.length > limits.maxRollouts) {
    return {
      code: 'too-many-rollouts',
      reason: `${rewards.length} rollouts exceed the limit of ${limits.maxRollouts}`,
    };
  }
  for (let i = 0; i < rewards.length; i++) {
    const r = rewards[i]!;
    if (!Number.isFinite(r)) return { code: 'non-finite-reward', reason: `rewards[${i}] is ${r}` };
    if (r < 0 || r > 1)
      return { code: 'reward-out-of-range', reason: `rewards[${i}] = ${r} is outside [0, 1]` };
  }
  if (limits.lateGroups !== 'fold' && lastStep !== undefined && step < lastStep - limits.staleStepTolerance) {
    return {
      code: 'stale-step',
      reason: `step ${step} is older than the task's last step ${lastStep} by more than the tolerance of ${limits.staleStepTolerance}`,
    };
  }
  return null;
}
