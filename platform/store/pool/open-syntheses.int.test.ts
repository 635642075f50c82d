// open_syntheses holds a campaign's runs from selection to outcome, whichever id form the run
// records, and the migration's backfill finds the same runs from the events.
import { randomUUID } from 'node:crypto';
import { afterAll, describe, expect, inject, it } from 'vitest';
import { eventIds, legacySynthesisId, streams, synthesisId } from '../../../domain/ids.js';
import { migrationUp, withScratchSchema } from '../../../test/support/store/migration-scratch.js';
import { createPool, inTransaction } from '../db.js';
import { typedEvent } from '../events/event-store.js';
import { openSyntheses } from './open-syntheses.js';
import { recordEventsIn } from './projection.js';

const pool = createPool({ application: 'rods-open-syntheses-test', max: 2 });
// The backfill runs in a scratch schema, which only the owner role may create.
const endpoints = inject('endpoints');
const owner = createPool({
  connectionString: endpoints.ownerDatabaseUrl ?? endpoints.databaseUrl,
  application: 'rods-open-syntheses-test-owner',
  max: 1,
});
afterAll(() => Promise.all([pool.end(), owner.end()]));

const stats = {
  groupCount: 2,
  count: 32,
  mean: 0.5,
  m2: 8,
  variance: 0.25,
  latestGroupMean: 0.5,
  latestGroupVariance: 0.25,
  ewma: 0.5,
  signal: 0.5,
  phi: 1,
  band: 'boundary' as const,
  lastStep: 3,
};

describe('open syntheses', () => {
  it('keep a run from its selection to its outcome, in either id form, not a variant', async () => {
    const campaignId = `open-${randomUUID().slice(0, 8)}`;
    const record = (stream: string, events: Parameters<typeof recordEventsIn>[2]) =>
      inTransaction(pool, (c) => recordEventsIn(c, stream, events));
    const selected = (seedTaskId: string, step: number) =>
      typedEvent('SeedSelected', {
        eventId: eventIds.seedSelected(campaignId, seedTaskId, step),
        campaignId,
        seedTaskId,
        step,
        phi: 1,
        quotaSlot: 0,
        category: 'base',
        stats,
        occurredAt: Date.now(),
      });
    await record(streams.campaign(campaignId), [selected('a', 3), selected('b', 3), selected('c', 4)]);
    const a = synthesisId(campaignId, 3, 'a');
    const b = legacySynthesisId(campaignId, 3, 'b'); // a run recorded under the older id form
    const started = (sid: string, seed: string) =>
      typedEvent('SynthesisStarted', {
        eventId: eventIds.synthesisStarted(sid),
        campaignId,
        synthesisId: sid,
        seedTaskId: seed,
        selectionEventId: randomUUID(),
        generatorModel: 'm',
        occurredAt: Date.now(),
      });
    const rejected = (sid: string, seed: string) =>
      typedEvent('CandidateRejected', {
        eventId: eventIds.candidateRejected(sid),
        campaignId,
        synthesisId: sid,
        candidateId: null,
        seedTaskId: seed,
        stage: 'plan',
        reasonCode: 'plan-failed',
        reason: 'x',
        occurredAt: Date.now(),
      });
    await record(streams.synthesis(a), [started(a, 'a')]);
    await record(streams.synthesis(b), [started(b, 'b')]);
    expect((await openSyntheses(pool, campaignId)).map((r) => [r.synthesisId, r.startedAt !== null])).toEqual(
      [
        [a, true],
        [b, true],
        [synthesisId(campaignId, 4, 'c'), false],
      ],
    );
    // A variant's outcome leaves its base run open; the runs' own outcomes close them.
    await record(streams.synthesis(`${a}~miss_func`), [rejected(`${a}~miss_func`, 'a')]);
    expect(await openSyntheses(pool, campaignId)).toHaveLength(3);
    await record(streams.synthesis(a), [rejected(a, 'a')]);
    await record(streams.synthesis(b), [rejected(b, 'b')]);
    expect((await openSyntheses(pool, campaignId)).map((r) => r.seedTaskId)).toEqual(['c']);

    // The migration's backfill over the campaign's events (a view in a scratch schema, rolled back)
    // finds the same run, started or not, in the same id form.
    await record(streams.campaign(campaignId), [selected('d', 5)]);
    const d = synthesisId(campaignId, 5, 'd');
    await record(streams.synthesis(d), [started(d, 'd')]);
    await withScratchSchema(
      owner,
      { events: `payload->>'campaignId' = '${campaignId}'` },
      async (c, schema) => {
        await c.query(migrationUp('0021_open_syntheses.sql'));
        const rows = (s: string) =>
          c
            .query(
              `select synthesis_id, legacy_id, seed_task_id, step::int, started_at is not null as started
                 from ${s}.open_syntheses where campaign_id = $1 order by step, seed_task_id`,
              [campaignId],
            )
            .then((r) => r.rows);
        const live = await rows('public');
        expect(live.map((r) => [r.seed_task_id, r.started])).toEqual([
          ['c', false],
          ['d', true],
        ]);
        expect(await rows(schema)).toEqual(live);
      },
    );
  });
});
