import { describe, expect, it } from 'vitest';
import { untilServing } from './secure.js';

/** A server whose answers are `seq` in turn (the last one repeated): one per new connection. */
const answers = (seq: string[]) => {
  let i = 0;
  const served = async () => seq[Math.min(i++, seq.length - 1)]!;
  return { served, connections: () => i };
};

describe('untilServing', () => {
  it('with several workers that reload in turn, waits until `consecutive` connections in a row present the new certificate', async () => {
    // Three processors handed out round-robin, the 2nd and 3rd reloaded one poll later each.
    const s = answers([
      'old',
      'new',
      'old',
      'old',
      'new',
      'new',
      'old',
      'new',
      'new',
      'new',
      'new',
      'new',
      'new',
    ]);
    await untilServing('kafka', s.served, 'new', { consecutive: 6 });
    expect(s.connections()).toBe(13);
  });

  it('returns at the first new certificate by default', async () => {
    const s = answers(['old', 'new', 'old']);
    await untilServing('postgres', s.served, 'new');
    expect(s.connections()).toBe(2);
  });

  it('names what still presents the old certificate, and the streak it waited for', async () => {
    // Two processors, one of which never reloads: new and old alternate.
    let n = 0;
    const served = async () => (n++ % 2 === 0 ? 'new' : 'old');
    await expect(
      untilServing('Kafka node 1', served, 'new', { timeoutMs: 300, consecutive: 2 }),
    ).rejects.toThrow(
      /^Kafka node 1 still presents (old|new) 0.3 s after the rotation, not new on 2 connections in a row$/,
    );
  });
});
