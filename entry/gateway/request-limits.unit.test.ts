// The gateway's per-token limits: configuration from the environment, the long-poll count and
// which draws of a /batch answer fit its byte cap; and the body hash that tells a resent batch
// from another body under the same id.
import { describe, expect, it } from 'vitest';
import { batchBodyHash } from './ingest.js';
import { DEFAULT_LIMITS, fitTasks, LongPolls, limitsFromEnv } from './request-limits.js';
import { RolloutBatch } from './schemas.js';

describe('limits from the environment', () => {
  it('defaults when unset, the values when set, an error naming a bad variable', () => {
    expect(limitsFromEnv({})).toEqual(DEFAULT_LIMITS);
    expect(
      limitsFromEnv({
        RODS_GATEWAY_MAX_BATCH_N: '64',
        RODS_GATEWAY_MAX_BATCH_BYTES: '4096',
        RODS_GATEWAY_MAX_LONG_POLLS: '2',
        RODS_GATEWAY_RATE_LIMIT: '0',
        RODS_GATEWAY_RATE_WINDOW_S: '10',
      }),
    ).toEqual({
      maxBatchN: 64,
      maxBatchBytes: 4096,
      maxLongPollsPerToken: 2,
      rateLimit: { max: 0, windowMs: 10_000 },
    });
    expect(() => limitsFromEnv({ RODS_GATEWAY_MAX_BATCH_N: '100001' })).toThrow(
      /RODS_GATEWAY_MAX_BATCH_N must be an integer in \[1, 100000\]/,
    );
    expect(() => limitsFromEnv({ RODS_GATEWAY_MAX_LONG_POLLS: '0' })).toThrow(/RODS_GATEWAY_MAX_LONG_POLLS/);
    expect(() => limitsFromEnv({ RODS_GATEWAY_RATE_LIMIT: '1.5' })).toThrow(/RODS_GATEWAY_RATE_LIMIT/);
  });
});

describe('long-polls per token', () => {
  it('refuses past the cap, per key, and frees a slot on release', () => {
    const polls = new LongPolls(2);
    expect([polls.acquire('a'), polls.acquire('a'), polls.acquire('a')]).toEqual([true, true, false]);
    expect(polls.acquire('b')).toBe(true);
    polls.release('a');
    expect(polls.acquire('a')).toBe(true);
    expect(polls.acquire('a')).toBe(false);
  });
});

describe('fitting a /batch answer in its byte cap', () => {
  it('keeps the longest prefix whose JSON fits, at least one draw', () => {
    const t = { id: 'x'.repeat(90) };
    const size = JSON.stringify(t).length;
    const draws = [t, t, t, t];
    // Four draws and three commas after a 50-byte envelope.
    expect(fitTasks(draws, 50, 50 + size * 4 + 3)).toHaveLength(4);
    expect(fitTasks(draws, 50, 50 + size * 4 + 2)).toHaveLength(3);
    expect(fitTasks(draws, 50, 50 + size)).toHaveLength(1);
    expect(fitTasks(draws, 50, 10)).toHaveLength(1);
    const tasks = fitTasks(draws, 20, 400);
    expect(20 + JSON.stringify(tasks).length - 2).toBeLessThanOrEqual(400);
  });

  it('counts UTF-8 bytes, not characters', () => {
    const t = { q: 'é'.repeat(50) }; // 100 bytes of the string
    expect(fitTasks([t, t], 0, 2 * 59 + 1)).toHaveLength(1);
    expect(fitTasks([t, t], 0, 2 * 108 + 1)).toHaveLength(2);
  });
});

describe('the body hash of a batch', () => {
  const parse = (v: unknown) => RolloutBatch.parse(v);
  const base = { batchId: 'b', policyVersion: 'p', groups: [{ taskId: 't', rewards: [0.5, 1] }] };
  it('ignores key order, spacing, number spelling and an absent close', () => {
    const h = batchBodyHash(parse(base));
    expect(h).toMatch(/^[0-9a-f]{64}$/);
    const reordered = JSON.parse(
      '{ "groups" : [ { "rewards": [0.50, 1.0], "taskId": "t" } ], "close": false, "policyVersion": "p", "batchId": "b" }',
    );
    expect(batchBodyHash(parse(reordered))).toBe(h);
  });

  it('changes with any reward, group, version or the close flag', () => {
    const h = batchBodyHash(parse(base));
    for (const other of [
      { ...base, groups: [{ taskId: 't', rewards: [0.5, 0.9] }] },
      { ...base, groups: [{ taskId: 't', rewards: [1, 0.5] }] },
      { ...base, groups: [...base.groups, { taskId: 'u', rewards: [0] }] },
      { ...base, policyVersion: 'q' },
      { ...base, close: true },
    ])
      expect(batchBodyHash(parse(other))).not.toBe(h);
  });
});
