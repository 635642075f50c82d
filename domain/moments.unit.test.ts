import { describe, expect, it } from 'vitest';
import { addValue, EMPTY_MOMENTS, mergeMoments, momentsOf, populationVariance } from './moments.js';

// Two-pass reference, independent of the Welford/Chan code under test.
function twoPass(xs: number[]): { mean: number; variance: number } {
  const mean = xs.reduce((a, b) => a + b, 0) / xs.length;
  return { mean, variance: xs.reduce((a, x) => a + (x - mean) ** 2, 0) / xs.length };
}

function lcg(seed: number): () => number {
  let s = seed >>> 0;
  return () => {
    s = (Math.imul(s, 1664525) + 1013904223) >>> 0;
    return s / 2 ** 32;
  };
}

describe('moments', () => {
  it('Welford matches the two-pass mean and variance', () => {
    const rnd = lcg(7);
    const xs = Array.from({ length: 1000 }, () => rnd());
    const m = momentsOf(xs);
    const ref = twoPass(xs);
    expect(m.n).toBe(1000);
    expect(m.mean).toBeCloseTo(ref.mean, 13);
    expect(populationVariance(m)).toBeCloseTo(ref.variance, 13);
  });

  it("Chan's merge of partial states equals the moments of the whole, in any split", () => {
    const rnd = lcg(11);
    const xs = Array.from({ length: 4096 }, () => (rnd() < 0.5 ? 0 : rnd()));
    const whole = momentsOf(xs);
    for (const cut of [1, 16, 1000, 4095]) {
      const merged = mergeMoments(momentsOf(xs.slice(0, cut)), momentsOf(xs.slice(cut)));
      expect(merged.n).toBe(whole.n);
      expect(Math.abs(merged.mean - whole.mean) / whole.mean).toBeLessThan(1e-12);
      expect(
        Math.abs(populationVariance(merged) - populationVariance(whole)) / populationVariance(whole),
      ).toBeLessThan(1e-12);
    }
    // Groups of 16 folded one by one, as the aggregator does.
    let acc = EMPTY_MOMENTS;
    for (let i = 0; i < xs.length; i += 16) acc = mergeMoments(acc, momentsOf(xs.slice(i, i + 16)));
    expect(Math.abs(populationVariance(acc) - twoPass(xs).variance) / twoPass(xs).variance).toBeLessThan(
      1e-12,
    );
  });

  it('handles the empty set and single values', () => {
    expect(populationVariance(EMPTY_MOMENTS)).toBe(0);
    expect(mergeMoments(EMPTY_MOMENTS, EMPTY_MOMENTS).n).toBe(0);
    const one = addValue(EMPTY_MOMENTS, 0.25);
    expect(one).toEqual({ n: 1, mean: 0.25, m2: 0 });
    expect(mergeMoments(one, EMPTY_MOMENTS)).toEqual(one);
    expect(populationVariance(momentsOf([0, 1]))).toBe(0.25);
  });
});
