import { describe, expect, it } from 'vitest';
import { newClusterId } from './kafka.js';

describe('newClusterId', () => {
  it('never starts with a dash, which the storage tool would read as an option', () => {
    // 0xf8 as the first byte encodes to '-' (index 62) in base64url; the second draw does not.
    const draws = [Buffer.alloc(16, 0xf8), Buffer.alloc(16, 0x41)];
    let calls = 0;
    const id = newClusterId(() => draws[calls++] as Buffer);
    expect(Buffer.alloc(16, 0xf8).toString('base64url')).toMatch(/^-/);
    expect(calls).toBe(2);
    expect(id).toBe(Buffer.alloc(16, 0x41).toString('base64url'));
    expect(id).toHaveLength(22);
  });
  it('draws 22 base64url characters', () => {
    for (let i = 0; i < 1000; i++) expect(newClusterId()).toMatch(/^[A-Za-z0-9_][A-Za-z0-9_-]{21}$/);
  });
});
