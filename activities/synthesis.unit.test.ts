import { ApplicationFailure } from '@temporalio/activity';
import type pg from 'pg';
import { describe, expect, it } from 'vitest';
import { type ExecutorClient, ExecutorError } from './executor-client.js';
import type { Candidate } from './llm/schemas.js';
import { createSynthesisActivities } from './synthesis.js';

// executeCandidate turns the executor's errors into Temporal failures: a request the executor
// refuses (a limit, a malformed request) is not retried; a busy or unreachable executor is, after
// the time it asked for.
const candidate = {
  id: 'c1',
  category: 'base',
  involved_classes: ['MathAPI'],
  initial_config: {},
  question: [[{ role: 'user', content: 'add' }]],
  ground_truth: [['add(a=1, b=2)']],
} as Candidate;

async function failureOf(error: ExecutorError): Promise<ApplicationFailure> {
  const executor = {
    execute: () => Promise.reject(error),
  } as unknown as ExecutorClient;
  const acts = createSynthesisActivities({ pool: {} as pg.Pool, executor });
  const err = await acts.executeCandidate({ candidate }).catch((e: unknown) => e);
  expect(err).toBeInstanceOf(ApplicationFailure);
  return err as ApplicationFailure;
}

describe('executeCandidate failures', () => {
  it('a refused request is final, with the executor message and the setting', async () => {
    const f = await failureOf(
      new ExecutorError('POST /execute: HTTP 422: ... (RODS_EXECUTOR_MAX_RESULT_BYTES)', 'http', 422, {
        limit: 'RODS_EXECUTOR_MAX_RESULT_BYTES',
      }),
    );
    expect(f).toMatchObject({ type: 'ExecutorRequestRefused', nonRetryable: true });
    expect(f.message).toContain('RODS_EXECUTOR_MAX_RESULT_BYTES');
    expect(f.details).toEqual([{ status: 422, limit: 'RODS_EXECUTOR_MAX_RESULT_BYTES' }]);
  });

  it('a busy executor is retried after its Retry-After; a down one with the policy backoff', async () => {
    const busy = await failureOf(new ExecutorError('HTTP 503: busy', 'http', 503, { retryAfterMs: 10_000 }));
    expect(busy).toMatchObject({ type: 'ExecutorUnavailable', nonRetryable: false, nextRetryDelay: 10_000 });
    const down = await failureOf(new ExecutorError('not reachable', 'down'));
    expect(down).toMatchObject({ type: 'ExecutorUnavailable', nonRetryable: false });
    expect(down.nextRetryDelay).toBeUndefined();
    const config = await failureOf(new ExecutorError('RODS_EXECUTOR_URL is not a URL', 'config'));
    expect(config).toMatchObject({ type: 'ExecutorUnavailable', nonRetryable: true });
  });
});

describe('samplingSeed', () => {
  it('is stable for a stage call, differs between syntheses and attempts, and fits a 31-bit int', async () => {
    const { samplingSeed } = await import('./synthesis.js');
    const a = samplingSeed({ synthesisId: 'syn-1', attempt: 0 });
    expect(samplingSeed({ synthesisId: 'syn-1', attempt: 0 })).toBe(a);
    const seeds = new Set<number>();
    for (let i = 0; i < 200; i++) seeds.add(samplingSeed({ synthesisId: `syn-${i}`, attempt: i % 3 }));
    expect(seeds.size).toBe(200);
    for (const s of seeds) expect(Number.isInteger(s) && s >= 0 && s < 2 ** 31).toBe(true);
    expect(samplingSeed({ synthesisId: 'syn-1', attempt: 1 })).not.toBe(a);
  });
});
