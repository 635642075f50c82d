import { describe, expect, it } from 'vitest';
import { C, events, stats } from '../../test/support/lineage/events.js';
import { LineageIndex } from './model.js';

describe('lineage model', () => {
  it('walks a generated task back to its human seed with every derivation', () => {
    const index = new LineageIndex(C, events());
    expect(index.knows('x')).toBe(false);
    const l = index.lineage('s~s2~s5')!;
    expect(l.complete).toBe(true);
    expect(l.root.depth).toBe(2);
    expect(l.root.rootSeedId).toBe('s');
    const d = l.root.derivation!;
    expect(d).toMatchObject({
      synthesisId: `synth-${C}-5-s~s2`,
      parents: ['s~s2'],
      step: 5,
      policyVersion: 'pv-5',
      generatorModel: 'gen',
      judge: {
        model: 'judge',
        verdict: 'accept',
        scores: { alignment: 1 },
        reasons: ['fine'],
        refined: false,
      },
      selection: { eventId: 'sel-2', step: 5, phi: 0.9, quotaSlot: 0 },
    });
    expect(d.stages.map((s) => [s.stage, s.model])).toEqual([
      ['plan', 'gen'],
      ['critique', 'judge'],
    ]);
    expect(l.root.life).toMatchObject({ injected: { step: 6, poolVersion: 6 }, status: 'active' });
    const parent = l.root.parents[0]!;
    expect(parent.taskId).toBe('s~s2');
    expect(parent.life.pruned).toEqual({ step: 7, poolVersion: 8, phi: 0.1, cap: 1 });
    expect(parent.life.status).toBe('pruned');
    const seed = parent.parents[0]!;
    expect(seed).toMatchObject({ taskId: 's', origin: 'seed', depth: 0, derivation: null, parents: [] });
    expect(seed.life.bandChanges).toEqual([{ from: null, to: 'boundary', step: 1, stats }]);
    expect(index.lineage('t')!.root.life.retired).toMatchObject({ rule: 'mastered', step: 4 });
    expect(index.lineage('nope')).toBeUndefined();
  });

  it('adds band changes read from per-step records after the recorded ones, in step order, with their window', () => {
    const index = new LineageIndex(C, events());
    expect(index.lineage('s')!.bandWindow).toBeNull();
    index.addBandChanges(
      [
        { taskId: 's', from: 'mastered', to: 'hard', step: 9, stats: null },
        { taskId: 's', from: 'boundary', to: 'mastered', step: 3, stats: null },
        { taskId: 'elsewhere', from: null, to: 'hard', step: 3, stats: null },
      ],
      { from: 2, to: 9 },
    );
    const l = index.lineage('s')!;
    expect(l.bandWindow).toEqual({ from: 2, to: 9 });
    expect(l.root.life.bandChanges.map((b) => [b.step, b.from, b.to])).toEqual([
      [1, null, 'boundary'],
      [3, 'boundary', 'mastered'],
      [9, 'mastered', 'hard'],
    ]);
  });

  it('marks a chain without a recorded parent as incomplete', () => {
    const evs = events().filter((e) => !(e.type === 'TaskSeeded' && e.payload.taskId === 's'));
    const l = new LineageIndex(C, evs).lineage('s~s2')!;
    expect(l.complete).toBe(false);
    expect(l.root.missingParents).toEqual(['s']);
  });
});
