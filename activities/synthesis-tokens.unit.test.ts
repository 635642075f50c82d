// A stage whose every answer the client refused still spent generator tokens: the activity counts
// them in rods_generator_tokens_total and records them in a StageFailed (the cost ledger) before it
// fails; when the record cannot be made, it fails retryably instead, and a retry appends once.
import { ApplicationFailure } from '@temporalio/activity';
import { MockActivityEnvironment } from '@temporalio/testing';
import type pg from 'pg';
import promClient from 'prom-client';
import { beforeEach, describe, expect, it, vi } from 'vitest';
import { eventIds, streams } from '../domain/ids.js';
import { promptVersion } from '../platform/config/prompts.js';
import type { NewEvent } from '../platform/store/events/event-store.js';
import type { ExecutorClient } from './executor-client.js';
import { loadGeneratorEndpoints } from './llm/endpoints.js';
import { GeneratorOutputError } from './llm/errors.js';
import type { Candidate } from './llm/schemas.js';

const REFUSED = new GeneratorOutputError(
  'turn-query',
  'm',
  [
    { raw: '{"secret-ish raw reply', issues: ['the reply is not JSON'] },
    { raw: '{"another raw reply', issues: ['the answer was cut off at max_completion_tokens (64)'] },
  ],
  { promptTokens: 700, completionTokens: 90 },
  promptVersion('turn-query'),
);

vi.mock('./llm/stages.js', async (original) => ({
  ...(await original<typeof import('./llm/stages.js')>()),
  turnQuery: vi.fn(async () => {
    throw REFUSED;
  }),
}));

// The store as the activity sees it: appends keyed by event id, so a batch already stored
// appends nothing (what append's unique event id does in PostgreSQL).
const stored: { streamId: string; event: NewEvent }[] = [];
vi.mock('../platform/store/pool/projection.js', async (original) => ({
  ...(await original<typeof import('../platform/store/pool/projection.js')>()),
  recordEventsIn: vi.fn(async (_c: unknown, streamId: string, events: NewEvent[]) => {
    const fresh = events.filter((e) => !stored.some((s) => s.event.eventId === e.eventId));
    for (const event of fresh) stored.push({ streamId, event });
    return { appended: fresh.length > 0, positions: [] };
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

/** A pool whose connections answer every statement (begin, commit), or fail while it is down. */
const pool = (state = { down: false }) =>
  ({
    connect: async () => {
      if (state.down) throw new Error('connect ECONNREFUSED 127.0.0.1:5432');
      return { query: async () => ({ rows: [], rowCount: 0 }), release: () => {} };
    },
  }) as unknown as pg.Pool;

const input = {
  campaignId: 'c',
  synthesisId: 's',
  attempt: 2,
  config: {},
  candidate: { id: 'c1' } as Candidate,
  turn: 0,
};

function activities(db: pg.Pool, metrics = new promClient.Registry()) {
  return createSynthesisActivities({
    pool: db,
    executor: {} as ExecutorClient,
    metrics,
    endpoints: loadGeneratorEndpoints({}),
    now: () => 1_700_000_000_000,
  });
}

describe('a stage the generator failed', () => {
  beforeEach(() => {
    stored.length = 0;
  });

  it('counts the refused answers’ tokens under its stage, records StageFailed, then fails without retry', async () => {
    const metrics = new promClient.Registry();
    const acts = activities(pool(), metrics);
    const err = await new MockActivityEnvironment().run(acts.writeTurnQuery, input).catch((e: unknown) => e);
    expect(err).toMatchObject({ type: 'GeneratorOutputError', nonRetryable: true });
    expect(await tokens(metrics)).toEqual({ 'rewrite/prompt': 700, 'rewrite/completion': 90 });
    expect(stored).toEqual([
      {
        streamId: streams.synthesis('s'),
        event: expect.objectContaining({
          type: 'StageFailed',
          eventId: eventIds.stageFailed('s', 'turn-query', 2),
          payload: {
            eventId: eventIds.stageFailed('s', 'turn-query', 2),
            campaignId: 'c',
            synthesisId: 's',
            stage: 'rewrite',
            attempt: 2,
            model: 'm',
            promptVersionHash: promptVersion('turn-query'),
            reason: REFUSED.message,
            promptTokens: 700,
            completionTokens: 90,
            occurredAt: 1_700_000_000_000,
          },
        }),
      },
    ]);
    // The reason is what a user reads: the last answer's issues, not the reply itself.
    const reason = (stored[0]!.event.payload as { reason: string }).reason;
    expect(reason).toContain('cut off at max_completion_tokens');
    expect(reason).not.toContain('raw reply');
  });

  it('records the failed stage once however often the activity runs', async () => {
    const acts = activities(pool());
    for (let i = 0; i < 3; i++)
      await new MockActivityEnvironment().run(acts.writeTurnQuery, input).catch(() => {});
    expect(stored.map((s) => s.event.type)).toEqual(['StageFailed']);
  });

  it('fails retryably when the StageFailed cannot be recorded, and the retry records it', async () => {
    const metrics = new promClient.Registry();
    const db = { down: true };
    const acts = activities(pool(db), metrics);
    const down = await new MockActivityEnvironment().run(acts.writeTurnQuery, input).catch((e: unknown) => e);
    expect(down).toBeInstanceOf(Error);
    expect(down).not.toBeInstanceOf(ApplicationFailure);
    expect((down as Error).message).toContain('ECONNREFUSED');
    expect(stored).toEqual([]);
    // The counter counts what was spent: the retry's request costs again.
    db.down = false;
    const retry = await new MockActivityEnvironment()
      .run(acts.writeTurnQuery, input)
      .catch((e: unknown) => e);
    expect(retry).toMatchObject({ type: 'GeneratorOutputError', nonRetryable: true });
    expect(stored.map((s) => s.event.eventId)).toEqual([eventIds.stageFailed('s', 'turn-query', 2)]);
    expect(await tokens(metrics)).toEqual({ 'rewrite/prompt': 1400, 'rewrite/completion': 180 });
  });
});
