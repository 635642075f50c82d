import { describe, expect, it } from 'vitest';
import { C, events } from '../../test/support/lineage/events.js';
import { LineageIndex } from './model.js';
import { lineageStats } from './stats.js';

describe('lineage statistics', () => {
  it('summarises by generation', () => {
    const s = lineageStats(new LineageIndex(C, events()));
    expect(s.tasks).toBe(4);
    expect(s.generations).toEqual([
      {
        depth: 0,
        tasks: 2,
        injected: 0,
        active: 1,
        retired: 1,
        pruned: 0,
        parents: 1,
        children: 1,
        meanBranching: 1,
        survivalShare: 0.5,
      },
      {
        depth: 1,
        tasks: 1,
        injected: 1,
        active: 0,
        retired: 0,
        pruned: 1,
        parents: 1,
        children: 1,
        meanBranching: 1,
        survivalShare: 0,
      },
      {
        depth: 2,
        tasks: 1,
        injected: 1,
        active: 1,
        retired: 0,
        pruned: 0,
        parents: 0,
        children: 0,
        meanBranching: 0,
        survivalShare: 1,
      },
    ]);
  });
});
