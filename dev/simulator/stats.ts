// Means and 95% confidence intervals over independent runs (Student's t), for `npm run dev -- experiment`.

/** Two-sided 97.5% quantiles of Student's t for 1..30 degrees of freedom. */
const T975 = [
  12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.16, 2.145, 2.131,
  2.12, 2.11, 2.101, 2.093, 2.086, 2.08, 2.074, 2.069, 2.064, 2.06, 2.056, 2.052, 2.048, 2.045, 2.042,
];

/** t quantile for a 95% interval with `df` degrees of freedom (the normal's 1.96 in the limit). */
export function t975(df: number): number {
  if (!(df >= 1)) throw new RangeError(`degrees of freedom must be >= 1, got ${df}`);
  if (df <= 30) return T975[Math.floor(df) - 1]!;
  // Beyond the table: the first two terms of the Cornish–Fisher expansion (error < 0.001).
  const z = 1.959964;
  return z + (z ** 3 + z) / (4 * df) + (5 * z ** 5 + 16 * z ** 3 + 3 * z) / (96 * df * df);
}

export interface Interval {
  n: number;
  mean: number;
  /** Sample standard deviation (n − 1); 0 for one value. */
  sd: number;
  /** Half-width of the 95% interval; null for fewer than two values. */
  half: number | null;
  lo: number | null;
  hi: number | null;
}

export function mean(xs: readonly number[]): number {
  return xs.length ? xs.reduce((a, b) => a + b, 0) / xs.length : Number.NaN;
}

/** Mean and 95% confidence interval of the mean: mean ± t(n−1) · sd / √n. */
export function ci95(xs: readonly number[]): Interval {
  const n = xs.length;
  if (n === 0) throw new RangeError('a confidence interval needs at least one value');
  const m = mean(xs);
  if (n === 1) return { n, mean: m, sd: 0, half: null, lo: null, hi: null };
  const sd = Math.sqrt(xs.reduce((a, x) => a + (x - m) ** 2, 0) / (n - 1));
  const half = (t975(n - 1) * sd) / Math.sqrt(n);
  return { n, mean: m, sd, half, lo: m - half, hi: m + half };
}

/** The interval of the paired differences a[i] − b[i] (the same seed under two policies). */
export function pairedCi95(a: readonly number[], b: readonly number[]): Interval {
  if (a.length !== b.length) throw new RangeError('paired samples must have the same length');
  return ci95(a.map((x, i) => x - b[i]!));
}
