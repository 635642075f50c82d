import { describe, expect, it } from 'vitest';
import { anchorIntervalMs } from './anchor.js';

describe('anchorIntervalMs', () => {
  it('is on by default (10 minutes), configurable, and off at 0', () => {
    expect(anchorIntervalMs({})).toBe(600_000);
    expect(anchorIntervalMs({ RODS_AUDIT_ANCHOR_MINUTES: '0.5' })).toBe(30_000);
    expect(anchorIntervalMs({ RODS_AUDIT_ANCHOR_MINUTES: '0' })).toBe(0);
    expect(() => anchorIntervalMs({ RODS_AUDIT_ANCHOR_MINUTES: 'soon' })).toThrow(
      /RODS_AUDIT_ANCHOR_MINUTES/,
    );
  });
});
