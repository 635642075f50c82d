// Running mean and variance of rewards: Welford's update for single values and Chan et al.'s
// merge for combining partial states (a whole reward group at a time, or two aggregator states).
// Pure and deterministic: the live aggregator, replay and what-if all use this code.

/** Count, mean and M2 (sum of squared deviations from the mean) of a set of values. */
export interface Moments {
  n: number;
  mean: number;
  m2: number;
}

export const EMPTY_MOMENTS: Readonly<Moments> = Object.freeze({ n: 0, mean: 0, m2: 0 });

/** Welford's single-value update. */
export function addValue(m: Moments, x: number): Moments {
  const n = m.n + 1;
  const delta = x - m.mean;
  const mean = m.mean + delta / n;
  return { n, mean, m2: m.m2 + delta * (x - mean) };
}

/** The moments of a list of values (Welford over the list, in order). */
export function momentsOf(values: readonly number[]): Moments {
  // addValue's arithmetic, in the same order, on locals: bit-identical, one object instead of
  // one per value (this runs for every reward group the aggregator and replay fold).
  let n = 0;
  let mean = 0;
  let m2 = 0;
  for (let i = 0; i < values.length; i++) {
    const x = values[i]!;
    n = n + 1;
    const delta = x - mean;
    mean = mean + delta / n;
    m2 = m2 + delta * (x - mean);
  }
  return n === 0 ? EMPTY_MOMENTS : { n, mean, m2 };
}

/** Chan's parallel merge: the moments of the union of two disjoint sets. */
export function mergeMoments(a: Moments, b: Moments): Moments {
  if (a.n === 0) return { ...b };
  if (b.n === 0) return { ...a };
  const n = a.n + b.n;
  const delta = b.mean - a.mean;
  return {
    n,
    mean: a.mean + (delta * b.n) / n,
    m2: a.m2 + b.m2 + (delta * delta * a.n * b.n) / n,
  };
}

/** Population variance (M2 / n); 0 for an empty set. Clamped at 0 against rounding. */
export function populationVariance(m: Moments): number {
  return m.n > 0 ? Math.max(0, m.m2 / m.n) : 0;
}
