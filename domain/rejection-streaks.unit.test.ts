import { describe, expect, it } from 'vitest';
import { rejectionStreaksOf } from './step-events.js';

const run = (seedTaskId: string, n: number, hasValidated: boolean) => ({
  seedTaskId,
  run: n,
  reasons: Array.from({ length: n }, (_, i) => `r${i}`),
  hasValidated,
});

describe('rejectionStreaksOf', () => {
  it('counts a seed when its `streak` latest children were all rejected, with the newest reasons', () => {
    const runs = [run('long', 5, true), run('short', 2, true), run('never', 2, false), run('none', 0, true)];
    expect(rejectionStreaksOf(runs, 3)).toEqual({
      long: { count: 3, reasons: ['r0', 'r1', 'r2'] },
      // fewer children than the streak, none validated: all its children were rejected
      never: { count: 2, reasons: ['r0', 'r1'] },
    });
    expect(rejectionStreaksOf(runs, 2)).toEqual({
      long: { count: 2, reasons: ['r0', 'r1'] },
      short: { count: 2, reasons: ['r0', 'r1'] },
      never: { count: 2, reasons: ['r0', 'r1'] },
    });
    expect(rejectionStreaksOf(runs, 0)).toEqual({});
  });
});
