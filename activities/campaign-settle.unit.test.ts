// A synthesis run that ended without an outcome gets a CandidateRejected from the campaign, at the
// stage it stopped in: the one a StageFailed names, else the one after its last completed stage.
import type { Client } from '@temporalio/client';
import type pg from 'pg';
import { beforeEach, describe, expect, it, vi } from 'vitest';
import { eventIds } from '../domain/ids.js';
import type { NewEvent } from '../platform/store/events/event-store.js';
import type { ExecutorClient } from './executor-client.js';

let history: { type: string; payload: Record<string, unknown> }[] = [];
const recorded: NewEvent[] = [];
vi.mock('../platform/store/events/event-store.js', async (original) => ({
  ...(await original<typeof import('../platform/store/events/event-store.js')>()),
  readStreamOf: vi.fn(async (_db: unknown, _stream: string, types: readonly string[]) =>
    history.filter((e) => types.includes(e.type)),
  ),
}));
vi.mock('../platform/store/pool/projection.js', async (original) => ({
  ...(await original<typeof import('../platform/store/pool/projection.js')>()),
  recordEventsIn: vi.fn(async (_c: unknown, _stream: string, events: NewEvent[]) => {
    recorded.push(...events);
    return { appended: true, positions: [] };
  }),
}));

const { createCampaignActivities } = await import('./campaign.js');

const pool = {
  connect: async () => ({ query: async () => ({ rows: [], rowCount: 0 }), release: () => {} }),
} as unknown as pg.Pool;
const acts = createCampaignActivities({
  pool,
  executor: {} as ExecutorClient,
  sinkDir: '/nonexistent',
  temporal: {} as Client,
});
const S = 'c:1:s1';
const stage = (type: 'StageCompleted' | 'StageFailed', s: string) => ({
  type,
  payload: { campaignId: 'c', synthesisId: S, stage: s },
});
const settle = () =>
  acts.settleSynthesis({
    campaignId: 'c',
    synthesisId: S,
    seedTaskId: 's1',
    ended: 'terminated',
    reason: 'x',
  });

describe('settling a run that ended without an outcome', () => {
  beforeEach(() => {
    recorded.length = 0;
  });

  it('rejects it at the stage its StageFailed names', async () => {
    history = [
      stage('StageCompleted', 'plan'),
      stage('StageCompleted', 'execute'),
      stage('StageFailed', 'execute'),
    ];
    expect(await settle()).toEqual({
      synthesisId: S,
      outcome: 'rejected',
      reasonCode: 'synthesis-terminated',
    });
    expect(recorded).toHaveLength(1);
    expect(recorded[0]!.payload).toMatchObject({ stage: 'execute', reasonCode: 'synthesis-terminated' });
    // the run's own rejection id, so that a retry appends nothing twice
    expect(recorded[0]!.eventId).toBe(eventIds.candidateRejected(S));
  });

  it('rejects it at the stage after its last completed one, and at plan when it completed none', async () => {
    history = [stage('StageCompleted', 'plan')];
    await settle();
    history = [];
    await settle();
    expect(recorded.map((e) => (e.payload as { stage: string }).stage)).toEqual(['execute', 'plan']);
  });

  it('keeps the outcome the run recorded', async () => {
    history = [
      stage('StageFailed', 'rewrite'),
      { type: 'CandidateRejected', payload: { reasonCode: 'generator-output-invalid' } },
    ];
    expect(await settle()).toEqual({
      synthesisId: S,
      outcome: 'rejected',
      reasonCode: 'generator-output-invalid',
    });
    expect(recorded).toEqual([]);
  });
});
