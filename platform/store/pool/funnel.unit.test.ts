// What the funnel's fold writes for a stage's tokens, without PostgreSQL (funnel.int.test.ts runs
// the same against the real tables): a failed stage adds its tokens under `failed`, marks nothing.
import type pg from 'pg';
import { describe, expect, it } from 'vitest';
import { recordFunnelEvent } from './funnel.js';

/** A client that records each statement and its parameters, and answers like an empty upsert. */
function capture() {
  const calls: { sql: string; params: unknown[] }[] = [];
  const c = {
    query: async (sql: string, params: unknown[] = []) => {
      calls.push({ sql, params });
      return { rows: [{ hashes: ['h'] }], rowCount: 1 };
    },
  } as unknown as pg.ClientBase;
  return { c, calls };
}

const base = {
  campaignId: 'c',
  synthesisId: 'c:1:s1',
  attempt: 1,
  model: 'gen',
  promptVersionHash: 'h',
  promptTokens: 3000,
  completionTokens: 12288,
};

describe('the funnel fold of a stage’s tokens', () => {
  it('adds a StageFailed’s tokens as a failed run of its stage, and marks no stage reached', async () => {
    const { c, calls } = capture();
    await recordFunnelEvent(c, 'StageFailed', { ...base, stage: 'rewrite', reason: 'cut off' });
    expect(calls).toHaveLength(1);
    expect(calls[0]!.sql).toMatch(/insert into synthesis_tokens/);
    expect(calls[0]!.params).toEqual(['c', 'rewrite', 0, 1, 3000, 12288]);
  });

  it('adds a StageCompleted’s tokens as a completion, after marking its stage', async () => {
    const { c, calls } = capture();
    await recordFunnelEvent(c, 'StageCompleted', { ...base, stage: 'plan', outputHash: 'o' });
    const tokens = calls.filter((q) => /synthesis_tokens/.test(q.sql));
    expect(tokens.map((q) => q.params)).toEqual([['c', 'plan', 1, 0, 3000, 12288]]);
    expect(calls.some((q) => /synthesis_funnel_marks/.test(q.sql))).toBe(true);
  });

  it('adds nothing for a StageFailed without usage', async () => {
    const { c, calls } = capture();
    await recordFunnelEvent(c, 'StageFailed', {
      ...base,
      stage: 'critique',
      reason: 'x',
      promptTokens: null,
      completionTokens: null,
    });
    expect(calls).toEqual([]);
  });
});
