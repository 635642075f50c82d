// TaskStats fixtures for the domain's tests and the sandbox scenario.
import type { TaskStats } from '../../../schemas/types.generated.js';

/**
 * TaskStats of a task whose detector signal is m after `groups` groups of 16 rollouts, as the
 * aggregator records it under the default thresholds (0.20 / 0.85); `over` replaces any field.
 */
export function statsOf(
  m: number,
  opts: { groups?: number; lastStep?: number } = {},
  over: Partial<TaskStats> = {},
): TaskStats {
  const groups = opts.groups ?? 4;
  return {
    groupCount: groups,
    count: 16 * groups,
    mean: m,
    m2: 16 * m * (1 - m),
    variance: m * (1 - m),
    latestGroupMean: m,
    latestGroupVariance: m * (1 - m),
    ewma: m,
    signal: m,
    phi: 4 * m * (1 - m),
    band: m < 0.2 ? 'hard' : m > 0.85 ? 'mastered' : 'boundary',
    lastStep: opts.lastStep ?? 1,
    ...over,
  };
}
