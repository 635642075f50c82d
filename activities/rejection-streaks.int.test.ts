// The planner's view of each seed's latest outcomes: the run of rejected children among the
// `streak` latest, in the order they were recorded.
import { randomUUID } from 'node:crypto';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { streams } from '../domain/ids.js';
import { createPool, inTransaction } from '../platform/store/db.js';
import { recordEventsIn } from '../platform/store/pool/projection.js';
import { ROOT } from '../test/support/sources.js';
import { rejectionStreaks } from './curriculum.js';
import { workerEvent } from './events.js';

const pool = createPool({ application: 'rods-rejection-streaks-test', max: 2 });
afterAll(() => pool.end());

describe('rejectionStreaks', () => {
  it('counts only seeds whose latest children were all rejected', async () => {
    const campaignId = `streaks-${randomUUID().slice(0, 8)}`;
    let n = 0;
    const outcome = async (seedTaskId: string, rejected: string | null) => {
      const synthesisId = `${campaignId}-${++n}`;
      const base = { campaignId, synthesisId, candidateId: `c${n}`, seedTaskId, occurredAt: Date.now() };
      await inTransaction(pool, (c) =>
        recordEventsIn(c, streams.synthesis(synthesisId), [
          rejected
            ? workerEvent('CandidateRejected', randomUUID(), {
                ...base,
                stage: 'critique',
                reasonCode: rejected,
                reason: 'test',
              })
            : workerEvent('CandidateValidated', randomUUID(), {
                ...base,
                category: 'base',
                candidate: '{}',
                candidateHash: randomUUID(),
                judgeModel: 'none',
                judgeScores: {},
                refined: false,
              }),
        ]),
      );
    };
    // barren: validated long ago, then three rejections; mixed: rejected, validated, rejected;
    // young: two rejections only.
    await outcome('barren', null);
    await outcome('barren', 'duplicate-candidate');
    await outcome('mixed', 'near-duplicate');
    await outcome('barren', 'near-duplicate');
    await outcome('mixed', null);
    await outcome('young', 'judge-rejected');
    await outcome('barren', 'judge-rejected');
    await outcome('mixed', 'near-duplicate');
    await outcome('young', 'judge-rejected');

    await inTransaction(pool, async (c) => {
      const s = await rejectionStreaks(c, campaignId, 3);
      expect(s).toEqual({
        barren: { count: 3, reasons: ['judge-rejected', 'near-duplicate', 'duplicate-candidate'] },
        young: { count: 2, reasons: ['judge-rejected', 'judge-rejected'] },
      });
      expect(await rejectionStreaks(c, campaignId, 0)).toEqual({});
      // A longer streak: barren's run is 3 after a validated child, so it no longer counts;
      // young was never validated and counts with what it has.
      expect(await rejectionStreaks(c, campaignId, 4)).toEqual({
        young: { count: 2, reasons: ['judge-rejected', 'judge-rejected'] },
      });
      expect(await rejectionStreaks(c, campaignId, 1)).toEqual({
        barren: { count: 1, reasons: ['judge-rejected'] },
        mixed: { count: 1, reasons: ['near-duplicate'] },
        young: { count: 1, reasons: ['judge-rejected'] },
      });
    });

    // The migration's backfill (campaigns recorded before the projection) reads the same runs
    // from the outcome events as the projection kept.
    const sql = readFileSync(
      path.join(ROOT, 'platform/store/migrations/0014_seed_rejection_runs.sql'),
      'utf8',
    );
    const backfill = sql.slice(
      sql.indexOf('select campaign_id, seed,'),
      sql.indexOf(' group by campaign_id, seed;'),
    );
    const rows = (query: string) =>
      pool
        .query(`${query} order by 2`, [campaignId])
        .then((r) => r.rows.map((x) => ({ ...x, run: Number(x.run) })));
    const kept = await rows(
      'select campaign_id, seed_task_id as seed, run, reasons, has_validated from seed_rejection_runs where campaign_id = $1',
    );
    expect(kept).toHaveLength(3);
    expect(
      await rows(`select * from (${backfill} group by campaign_id, seed) b where campaign_id = $1`),
    ).toEqual(kept);
  });
});
