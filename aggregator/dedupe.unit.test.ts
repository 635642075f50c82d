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
});
