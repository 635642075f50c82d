// A stage whose every answer the client refused still spent generator tokens: the activity counts
// them in rods_generator_tokens_total before it fails (no StageCompleted is recorded for it).
import { MockActivityEnvironment } from '@temporalio/testing';
import type pg from 'pg';
import promClient from 'prom-client';
import { describe, expect, it, vi } from 'vitest';
import type { ExecutorClient } from './executor-client.js';
import { loadGeneratorEndpoints } from './llm/endpoints.js';
import { GeneratorOutputError } from './llm/errors.js';
import type { Candidate } from './llm/schemas.js';

vi.mock('./llm/stages.js', async (original) => ({
  ...(await original<typeof import('./llm/stages.js')>()),
  turnQuery: vi.fn(async () => {
    throw new GeneratorOutputError('turn-query', 'm', [{ raw: '{', issues: ['not JSON'] }], {
      promptTokens: 700,
      completionTokens: 90,
    });
  }),
}));

const { createSynthesisActivities } = await import('./synthesis.js');

const tokens = async (registry: promClient.Registry) =>
  Object.fromEntries(
    ((await registry.getSingleMetric('rods_generator_tokens_total')?.get())?.values ?? []).map((v) => [
      `${v.labels.stage}/${v.labels.kind}`,
      v.value,
    ]),
  );

describe('a stage the generator failed', () => {
  it('counts the refused answers’ tokens under its stage, then fails without retry', async () => {
    const metrics = new promClient.Registry();
    const acts = createSynthesisActivities({
      pool: {} as pg.Pool,
      executor: {} as ExecutorClient,
      metrics,
      endpoints: loadGeneratorEndpoints({}),
    });
    const err = await new MockActivityEnvironment()
      .run(acts.writeTurnQuery, {
        campaignId: 'c',
        synthesisId: 's',
        attempt: 0,
        config: {},
        candidate: { id: 'c1' } as Candidate,
        turn: 0,
      })
      .catch((e: unknown) => e);
    expect(err).toMatchObject({ type: 'GeneratorOutputError', nonRetryable: true });
    expect(await tokens(metrics)).toEqual({ 'rewrite/prompt': 700, 'rewrite/completion': 90 });
  });
});
