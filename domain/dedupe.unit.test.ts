import { describe, expect, it } from 'vitest';
import { DedupeWindows } from './dedupe.js';

describe('DedupeWindows', () => {
  it('recognises the ids of a stored window and of groups remembered in this batch', () => {
    const w = new DedupeWindows(3);
    w.load('t', ['a', 'b']);
    expect(w.seen('t', 'a')).toBe(true);
    expect(w.seen('t', 'c')).toBe(false);
    expect(w.seen('other', 'a')).toBe(false);
    w.remember('t', 'c');
    w.remember('u', 'x');
    expect(w.seen('t', 'c')).toBe(true);
    expect(w.seen('u', 'x')).toBe(true);
    expect(w.of('t')).toEqual(['a', 'b', 'c']);
    expect(w.of('u')).toEqual(['x']);
    expect(w.of('never')).toEqual([]);
  });

  it('forgets the oldest ids beyond the window, in the order they were applied', () => {
    const w = new DedupeWindows(3);
    w.load('t', ['a', 'b', 'c']);
    w.remember('t', 'd');
    w.remember('t', 'e');
    expect(w.of('t')).toEqual(['c', 'd', 'e']);
    expect(w.seen('t', 'a')).toBe(false);
    expect(w.seen('t', 'b')).toBe(false);
    expect(w.seen('t', 'c')).toBe(true);
    expect(w.seen('t', 'e')).toBe(true);
  });

  it('trims a stored window longer than the size on the next remembered id', () => {
    const w = new DedupeWindows(2);
    w.load('t', ['a', 'b', 'c', 'd']);
    w.remember('t', 'e');
    expect(w.of('t')).toEqual(['d', 'e']);
    expect(w.seen('t', 'c')).toBe(false);
    expect(w.seen('t', 'd')).toBe(true);
  });

  it('keeps exactly the last N ids over a long run (the window drops its oldest in bulk)', () => {
    const w = new DedupeWindows(3);
    w.load('t', ['s0', 's1']);
    const applied = ['s0', 's1'];
    for (let i = 0; i < 50; i++) {
      w.remember('t', `g${i}`);
      applied.push(`g${i}`);
      const last = applied.slice(-3);
      expect(w.of('t')).toEqual(last);
      for (const id of applied) expect(w.seen('t', id)).toBe(last.includes(id));
    }
  });
});
