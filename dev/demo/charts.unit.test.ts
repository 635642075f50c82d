import { describe, expect, it } from 'vitest';
import { barChart, lineChart, yAxis } from './charts.js';

/** The y-axis tick labels of a chart, top last. */
const yLabels = (svg: string) =>
  [...svg.matchAll(/<text x="62" y="[\d.]+" text-anchor="end" font-size="11">([^<]+)<\/text>/g)].map(
    (m) => m[1],
  );

describe('demo charts', () => {
  it('run the y axis to a round top with round ticks', () => {
    expect(yAxis(61.6)).toMatchObject({ top: 70, ticks: [0, 10, 20, 30, 40, 50, 60, 70] });
    expect(yAxis(0.0123).ticks).toEqual([0, 0.002, 0.004, 0.006, 0.008, 0.01, 0.012, 0.014]);
    expect(yAxis(0).ticks).toEqual([0, 0.2, 0.4, 0.6, 0.8, 1]);
    // Before: five ticks at max × 1.1 / 4, e.g. 16.9, 33.9, 50.8, 67.8.
    const svg = lineChart('t', 'step', 'groups', [{ name: 'a', values: [12, 61.6, 40] }]);
    expect(yLabels(svg)).toEqual(['0', '10', '20', '30', '40', '50', '60', '70']);
  });

  it('keep every tick label clear of the y-axis title', () => {
    for (const max of [0.0123, 0.37, 7.7, 61.6, 830, 12_345, 987_654]) {
      const svg = barChart('t', 'x', 'y', [{ label: 'a', value: max }]);
      const labels = yLabels(svg);
      expect(labels.length).toBeGreaterThanOrEqual(3);
      // 11 px sans-serif: at most ~6.6 px a character; the rotated 12 px title ends by x = 21.
      for (const l of labels) expect(62 - 6.6 * l!.length, `${l} at max ${max}`).toBeGreaterThan(21);
    }
  });
});
