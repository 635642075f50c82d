import { describe, expect, it } from 'vitest';
import { applyTextMap, renameFsName, seedTurnText } from './mutate.js';
import { Rng } from './rng.js';
import { balancedChunks, unitsOf } from './seed.js';

describe('file-system renames', () => {
  it('keeps the extension and the hidden dot, swaps known words, and never reuses a name', () => {
    const taken = new Set(['final_report.pdf', 'summary.pdf']);
    const rng = new Rng('t');
    const a = renameFsName('final_report.pdf', rng, taken);
    expect(a).toMatch(/\.pdf$/);
    expect(a).not.toBe('final_report.pdf');
    expect(renameFsName('.hidden_file', rng, taken)).toMatch(/^\.hidden_[a-z0-9_]+$/);
    const names = new Set<string>();
    for (let i = 0; i < 50; i++) names.add(renameFsName('report.txt', rng, taken));
    expect(names.size).toBe(50);
    for (const n of names) expect(n).not.toMatch(/[|/\\?%*:"><]/);
  });

  it('is deterministic for a seed', () => {
    const run = () => renameFsName('ProjectOverview.txt', new Rng('same'), new Set());
    expect(run()).toBe(run());
  });
});

describe('text map', () => {
  it('replaces whole names only, longest first, in one pass', () => {
    const map = new Map([
      ['temp', 'scratch'],
      ['final_report.pdf', 'closing_summary.pdf'],
      ['scratch', 'never'],
    ]);
    expect(applyTextMap("Move 'final_report.pdf' into temp, not temperature or my_temp.", map)).toBe(
      "Move 'closing_summary.pdf' into scratch, not temperature or my_temp.",
    );
  });
});

describe('seed units', () => {
  it('splits long turns into near-equal parts of at most three calls', () => {
    expect(balancedChunks([1, 2, 3, 4, 5, 6, 7], 3).map((c) => c.length)).toEqual([3, 2, 2]);
    expect(balancedChunks([1, 2], 3, 2).map((c) => c.length)).toEqual([1, 1]);
    const units = unitsOf(
      {
        involved_classes: ['GorillaFileSystem'],
        ground_truth: [[], ["cd(folder='a')", 'ls()', "cat(file_name='x')", 'pwd()'], ['ls()']],
      },
      3,
    );
    expect(units.map((u) => [u.label, u.calls.length, u.readOnly])).toEqual([
      ['2a', 2, false],
      ['2b', 2, true],
      ['3', 1, true],
    ]);
  });

  it('splits the single turn of a one-turn seed so a plan gets two turns', () => {
    const units = unitsOf(
      {
        involved_classes: ['VehicleControlAPI'],
        ground_truth: [['startEngine(ignitionMode="START")', 'check_tire_pressure()']],
      },
      3,
    );
    expect(units).toHaveLength(2);
  });

  it('joins a turn with the call-less turns before it (miss_param clarifications)', () => {
    const seed = {
      question: [
        [{ role: 'user', content: 'Move one file.' }],
        [{ role: 'user', content: 'It is a.txt.' }],
        [],
      ],
      ground_truth: [[], ["mv(source='a.txt', destination='b')"], ['ls()']],
    };
    expect(seedTurnText(seed, 1)).toBe('Move one file. It is a.txt.');
    expect(seedTurnText(seed, 2)).toBe('');
  });
});
