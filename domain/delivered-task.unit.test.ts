import { describe, expect, it } from 'vitest';
import { deliveredTask } from './delivered-task.js';
import { bfclTaskId, candidateId } from './ids.js';

// What bfcl-eval does with an id: the test category is the id up to its last `_`, the rest an
// integer index (its sort key), and the id, with `-./:` replaced, becomes part of a Python name.
const bfclParses = (id: string, category: string) => {
  const cut = id.lastIndexOf('_');
  return (
    id.slice(0, cut) === `multi_turn_${category}` &&
    /^\d+$/.test(id.slice(cut + 1)) &&
    /^[A-Za-z_][A-Za-z0-9_]*$/.test(id.replace(/[-./:]/g, '_'))
  );
};

describe('bfclTaskId', () => {
  it('keeps a seed BFCL id and pins the id of a synthesized task', () => {
    expect(bfclTaskId('multi_turn_base_17', 'base')).toBe('multi_turn_base_17');
    expect(bfclTaskId('multi_turn_miss_func_3', 'miss_func')).toBe('multi_turn_miss_func_3');
    // Recorded data: a trainer may have stored results under these ids (checked against Python's
    // hashlib: 1,000,000 + the first 6 bytes of SHA-256 of 'bfcl-task-id', U+001F, the rods id).
    expect(bfclTaskId('multi_turn_base_17~s2', 'base')).toBe('multi_turn_base_176349360942241');
  });

  it('gives every synthesized id a form bfcl-eval parses, in the task category', () => {
    const ids = [
      candidateId('multi_turn_base_2', 6),
      candidateId(candidateId('multi_turn_long_context_0', 3), 9),
      'multi_turn_base_2~s6~miss_func',
      'a',
    ];
    for (const id of ids) {
      expect(bfclParses(id, 'base')).toBe(false);
      for (const category of ['base', 'miss_func', 'miss_param', 'long_context']) {
        const b = bfclTaskId(id, category);
        expect(bfclParses(b, category)).toBe(true);
        const n = Number(b.slice(b.lastIndexOf('_') + 1));
        expect(Number.isSafeInteger(n) && n >= 1_000_000).toBe(true);
      }
    }
    // A seed id of another category is not kept: the id names the task's own category.
    expect(bfclTaskId('multi_turn_base_2', 'miss_func')).toMatch(/^multi_turn_miss_func_\d{7,}$/);
  });

  it('does not collide across the synthesized ids of a large pool', () => {
    const seen = new Set<string>();
    for (let s = 0; s < 200; s++)
      for (let step = 1; step <= 50; step++)
        seen.add(bfclTaskId(candidateId(`multi_turn_base_${s}`, step), 'base'));
    expect(seen.size).toBe(200 * 50);
  });
});

describe('deliveredTask', () => {
  it('delivers the record under its BFCL id with the rods id beside it', () => {
    const record = { id: 'multi_turn_base_2~s6', category: 'base', question: [[]], ground_truth: [[]] };
    const d = deliveredTask('multi_turn_base_2~s6', 'base', JSON.stringify(record));
    expect(d).toEqual({ ...record, id: bfclTaskId('multi_turn_base_2~s6', 'base'), rods_task_id: record.id });
    expect(deliveredTask('multi_turn_base_2', 'base', { id: 'multi_turn_base_2' })).toEqual({
      id: 'multi_turn_base_2',
      rods_task_id: 'multi_turn_base_2',
    });
  });

  it("names the record's own category (a variant of a base seed is a miss_func task)", () => {
    const d = deliveredTask('multi_turn_base_2~s6~mf', 'base', { category: 'miss_func' });
    expect(d.id).toMatch(/^multi_turn_miss_func_\d+$/);
  });
});
