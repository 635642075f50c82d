// Each pool member keeps the BFCL id the pool delivers it under (migration 0026), so the gateway maps
// a reported id back by index; the migration's SQL gives the same ids as domain/delivered-task.ts.
import { randomUUID } from 'node:crypto';
import { afterAll, describe, expect, inject, it } from 'vitest';
import { candidateHash } from '../../../domain/candidate.js';
import { deliveredId } from '../../../domain/delivered-task.js';
import { eventIds, streams } from '../../../domain/ids.js';
import { migrationUp, withScratchSchema } from '../../../test/support/store/migration-scratch.js';
import { createPool, inTransaction } from '../db.js';
import { typedEvent } from '../events/event-store.js';
import { poolMembersByBfclId } from './members.js';
import { recordEventsIn } from './projection.js';

const pool = createPool({ application: 'rods-bfcl-ids-test', max: 2 });
const endpoints = inject('endpoints');
const owner = createPool({
  connectionString: endpoints.ownerDatabaseUrl ?? endpoints.databaseUrl,
  application: 'rods-bfcl-ids-test-owner',
  max: 1,
});
afterAll(() => Promise.all([pool.end(), owner.end()]));

describe('BFCL ids of pool members', () => {
  it('are kept as delivered, found by index, and the migration computes the same', async () => {
    const campaignId = `bfcl-${randomUUID().slice(0, 8)}`;
    const record = (id: string, category: string) => ({ id, category, question: [], ground_truth: [] });
    const seeded = (taskId: string, category: string) =>
      typedEvent('TaskSeeded', {
        eventId: eventIds.taskSeeded(campaignId, taskId),
        campaignId,
        taskId,
        category,
        task: JSON.stringify(record(taskId, category)),
        taskHash: candidateHash(record(taskId, category)),
        source: 'test',
        poolVersion: 1,
        occurredAt: Date.now(),
      });
    // A seed keeps its id; a generated task (here seeded under a rods id) gets multi_turn_<category>_<n>,
    // with its record's category (long_context) over the pool's.
    const tasks = [
      ['multi_turn_base_12', 'base'],
      ['multi_turn_base_12~s3', 'base'],
      ['multi_turn_long_context_7~s9~miss_param', 'long_context'],
      ['ünïcode~s1', 'miss_func'],
    ] as const;
    await inTransaction(pool, (c) =>
      recordEventsIn(
        c,
        streams.campaign(campaignId),
        tasks.map(([t, cat]) => seeded(t, cat)),
      ),
    );
    const expected = tasks.map(([t, cat]) => deliveredId(t, cat, record(t, cat)));
    expect(expected[0]).toBe('multi_turn_base_12');
    expect(expected[1]).toMatch(/^multi_turn_base_\d{7,}$/);
    const found = await poolMembersByBfclId(pool, campaignId, [...expected, 'multi_turn_base_999']);
    expect([...found]).toEqual(expected.map((id, i) => [id, tasks[i]![0]]).sort());

    // The migration's backfill over these rows (an updatable view in a scratch schema, rolled back).
    const update = /update pool_members[\s\S]*?end;/.exec(migrationUp('0026_pool_members_bfcl_id.sql'))![0];
    await withScratchSchema(owner, { pool_members: `campaign_id = '${campaignId}'` }, async (c) => {
      await c.query('update pool_members set bfcl_id = null');
      await c.query(update);
      const { rows } = await c.query<{ task_id: string; bfcl_id: string }>(
        'select task_id, bfcl_id from pool_members order by task_id',
      );
      expect(Object.fromEntries(rows.map((r) => [r.task_id, r.bfcl_id]))).toEqual(
        Object.fromEntries(tasks.map(([t], i) => [t, expected[i]])),
      );
    });
  });
});
