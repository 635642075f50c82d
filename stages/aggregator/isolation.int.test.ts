// One campaign's burst of records that cannot be folded does not hold another campaign's step
// (issue 24, point 2). 5,000 groups of one campaign, refused by the store, sit ahead of another
// campaign's step on one partition. Before, each failing record was found by applying its batch
// one record at a time and tried 3 times with backoff (about 0.4 s per dead letter: over half an
// hour for this burst); now the batch is searched with probes and the rest of it commits with
// the failing records dead-lettered. How long it takes is measured by `npm run bench --
// isolation`; here, what happens: every failing record dead-lettered once with the error, every
// healthy group counted, the healthy step closed.
import { afterAll, describe, expect, inject, it } from 'vitest';
import { decode } from '../../platform/codec/registry.js';
import { readUntil } from '../../platform/kafka/client.js';
import { DLQ_TOPIC } from '../../platform/kafka/dlq.js';
import { createPool } from '../../platform/store/db.js';
import { queryStats } from '../../platform/store/task-stats/view.js';
import { runFailingBurst } from '../../test/support/aggregator/failing-burst.js';

const pool = createPool({ application: 'rods-aggregator-isolation-test', max: 6 });
const endpoints = inject('endpoints');
const owner = createPool({ connectionString: endpoints.ownerDatabaseUrl ?? endpoints.databaseUrl, max: 1 });
afterAll(async () => {
  await pool.end();
  await owner.end();
});

describe('a burst of failing records of one campaign', () => {
  it('5,000 refused groups ahead of another campaign: each dead-lettered once, the other step counted and closed', async () => {
    const burst = 5000;
    const tasks = 50;
    // The deadline only keeps a hang from stalling the run (the old path needs over 30 minutes).
    const r = await runFailingBurst({ pool, owner, burst, tasks, failing: true, timeoutMs: 600_000 });
    const healthy = await queryStats(pool, { campaignId: r.healthyCampaign });
    expect(healthy).toHaveLength(tasks);
    expect(healthy.every((t) => t.groups === 1)).toBe(true);
    expect(await queryStats(pool, { campaignId: r.failingCampaign })).toEqual([]);
    const letters = new Map<number, { code: string; reason: string }>();
    await readUntil(
      DLQ_TOPIC,
      (m) => {
        const d = decode(m.value!);
        if (d.name === 'DeadLettered' && d.payload.sourceTopic === r.topic)
          letters.set(d.payload.offset, { code: d.payload.reasonCode, reason: d.payload.reason });
        return letters.size >= burst;
      },
      { timeoutMs: 120_000 },
    );
    expect(letters.size).toBe(burst);
    expect([...letters.keys()].sort((a, b) => a - b)).toEqual(Array.from({ length: burst }, (_, i) => i));
    for (const l of letters.values()) {
      expect(l.code).toBe('processing-failed');
      expect(l.reason).toMatch(/failed \d+ times at offset \d+ .*injected failure for task-/);
    }
    // Nothing left counting: every failure was resolved.
    const left = await pool.query(
      'select count(*)::int as n from aggregator_record_failures where topic = $1',
      [r.topic],
    );
    expect(left.rows[0].n).toBe(0);
  }, 700_000);
});
