import { describe, expect, it } from 'vitest';
import { SERIES_POINTS, sampledSteps } from './dashboard.js';

describe('the steps a dashboard series shows', () => {
  it('are every step while there are few, then a stride that keeps them under the bound, and the last', () => {
    expect(sampledSteps(0)).toEqual({ stride: 1 });
    expect(sampledSteps(SERIES_POINTS)).toEqual({ stride: 1 });
    const at10k = sampledSteps(10_000);
    expect(at10k.stride).toBe(Math.ceil(10_000 / SERIES_POINTS));
    expect(at10k.steps!.length).toBeLessThanOrEqual(SERIES_POINTS + 1);
    expect(at10k.steps!.at(-1)).toBe(10_000);
    expect(at10k.steps!.slice(0, 2)).toEqual([at10k.stride, 2 * at10k.stride]);
    // Strictly increasing: the last step is not repeated when the stride lands on it.
    expect(sampledSteps(484, 121).steps).toEqual(Array.from({ length: 121 }, (_, k) => 4 * (k + 1)));
  });
});
