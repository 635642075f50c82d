// Replay reads every event of the campaign committed when it starts, also those a transaction
// still open elsewhere hides from readers for a while: an empty page is not the end.
import { randomUUID } from 'node:crypto';
import { afterAll, describe, expect, inject, it } from 'vitest';
import { registerCampaign } from '../../platform/store/campaigns.js';
import { createPool } from '../../platform/store/db.js';
import { staysFalse } from '../../test/support/wait.js';
import { replayCampaign, replaySchema } from './replay.js';

const endpoints = inject('endpoints');
const pool = createPool({ application: 'rods-replay-hidden-test', max: 4 });
const ownerPool = createPool({
  connectionString: endpoints.ownerDatabaseUrl ?? endpoints.databaseUrl,
  application: 'rods-replay-hidden-test-owner',
  max: 4,
});
const schemas: string[] = [];

afterAll(async () => {
  for (const s of schemas) await ownerPool.query(`drop schema if exists ${s} cascade`);
  await pool.end();
  await ownerPool.end();
});

describe('replay and transactions still open', () => {
  it('waits for committed events hidden behind an older open transaction, then equals live', async () => {
    const campaignId = `hidden-${randomUUID().slice(0, 8)}`;
    schemas.push(replaySchema(campaignId));
    const holder = await pool.connect();
    let finished = false;
    try {
      await holder.query('begin');
      await holder.query('select pg_current_xact_id()');
      // Committed after the holder began: readers cannot see CampaignStarted until it ends.
      await registerCampaign(pool, { campaignId });
      const run = replayCampaign(ownerPool, { campaignId, fresh: true }).finally(() => {
        finished = true;
      });
      await staysFalse(() => finished, 1500, { what: 'replay ending before the hidden events are readable' });
      await holder.query('commit');
      const r = await run;
      expect(r.events).toBeGreaterThan(0);
      expect(r.tables.find((t) => t.table === 'campaigns')?.equal).toBe(true);
      expect(r.equal).toBe(true);
    } finally {
      await holder.query('rollback').catch(() => {});
      holder.release();
    }
  });
});
