import { describe, expect, it } from 'vitest';
import { ci95, mean, pairedCi95, t975 } from './stats.js';

describe('95% confidence intervals', () => {
  it('uses Student t quantiles, tending to the normal 1.96', () => {
    expect(t975(1)).toBe(12.706);
    expect(t975(9)).toBe(2.262);
    expect(t975(30)).toBe(2.042);
    expect(t975(60)).toBeCloseTo(2.0003, 3);
    expect(t975(120)).toBeCloseTo(1.9799, 3);
    expect(t975(1e6)).toBeCloseTo(1.96, 3);
    expect(() => t975(0)).toThrow(RangeError);
  });

  it('mean ± t(n−1)·sd/√n', () => {
    const i = ci95([1, 2, 3, 4, 5]);
    expect(i.n).toBe(5);
    expect(i.mean).toBe(3);
    expect(i.sd).toBeCloseTo(Math.sqrt(2.5), 12);
    expect(i.half).toBeCloseTo((2.776 * Math.sqrt(2.5)) / Math.sqrt(5), 12);
    expect(i.lo).toBeCloseTo(3 - i.half!, 12);
    expect(i.hi).toBeCloseTo(3 + i.half!, 12);
    expect(ci95([2, 2, 2]).half).toBe(0);
  });

  it('has no interval for one value and refuses none', () => {
    expect(ci95([0.4])).toEqual({ n: 1, mean: 0.4, sd: 0, half: null, lo: null, hi: null });
    expect(() => ci95([])).toThrow(RangeError);
    expect(mean([])).toBeNaN();
  });

  it('pairs differences seed by seed: a constant shift has a zero-width interval', () => {
    const a = [0.1, 0.5, 0.3, 0.9];
    const d = pairedCi95(
      a.map((x) => x + 0.02),
      a,
    );
    expect(d.mean).toBeCloseTo(0.02, 12);
    expect(d.half).toBeCloseTo(0, 12);
    expect(() => pairedCi95([1], [1, 2])).toThrow(RangeError);
  });
});
