// The 422 of a request with very many bad fields stays small: a body under the 8 MiB limit can
// hold 1.6 million rewards, and each bad one used to be listed twice (errors and detail), a
// response of about 200 MB for one request.
import { describe, expect, it } from 'vitest';
import { MAX_FIELD_ERRORS, ProblemError, parseOr422 } from './problem.js';
import { RolloutBatch } from './schemas.js';

function refusal(value: unknown): ProblemError {
  try {
    parseOr422(RolloutBatch, value, 'rollout batch');
  } catch (e) {
    expect(e).toBeInstanceOf(ProblemError);
    return e as ProblemError;
  }
  throw new Error('expected a refusal');
}

describe('a 422 with many bad fields', () => {
  it('lists the first MAX_FIELD_ERRORS, in order, and counts them all', () => {
    const groups = Array.from({ length: 500 }, (_, i) => ({ taskId: `t${i}`, rewards: [50, 0.5, 70] }));
    const e = refusal({ batchId: 'b', policyVersion: 'p', groups, extra: 1 });
    expect(e.status).toBe(422);
    expect(e.errors).toHaveLength(MAX_FIELD_ERRORS);
    expect(e.errors!.slice(0, 3)).toEqual([
      { field: 'groups[0].rewards[0]', message: 'reward must be in [0,1]' },
      { field: 'groups[0].rewards[2]', message: 'reward must be in [0,1]' },
      { field: 'groups[1].rewards[0]', message: 'reward must be in [0,1]' },
    ]);
    // 1000 rewards and the unknown field (which zod reports last).
    expect(e.extensions).toEqual({ errorCount: 1001 });
    expect(e.message.length).toBeLessThan(10_000);
    expect(e.message).toMatch(
      /^invalid rollout batch: groups\[0\]\.rewards\[0\]: reward must be in \[0,1\]; /,
    );
    expect(e.message).toMatch(/; and 901 more$/);
  });

  it('lists every error, with no count, when there are few', () => {
    const e = refusal({ batchId: 'b', policyVersion: 'p', groups: [{ taskId: 't', rewards: [2] }] });
    expect(e.errors).toEqual([{ field: 'groups[0].rewards[0]', message: 'reward must be in [0,1]' }]);
    expect(e.extensions).toBeUndefined();
    expect(e.message).toBe('invalid rollout batch: groups[0].rewards[0]: reward must be in [0,1]');
  });
});
