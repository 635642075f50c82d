// The sink keeps the newest versions only: delivering versions 1..5 with sinkKeep 2 leaves
// pool-v4, pool-v5 and current.jsonl (the newest pool), on the real file system and store.
import { randomUUID } from 'node:crypto';
import { mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { createPool } from '../platform/store/db.js';
import { createCampaignActivities } from './campaign.js';

const pool = createPool({ application: 'rods-pool-sink-test', max: 2 });
afterAll(() => pool.end());

describe('pool sink retention', () => {
  it('removes version files older than the newest sinkKeep after each delivery', async () => {
    const sinkDir = await mkdtemp(path.join(tmpdir(), 'rods-sink-'));
    try {
      const campaignId = `sink-${randomUUID().slice(0, 8)}`;
      // Delivery reads the store and writes files; it needs neither the executor nor Temporal.
      const a = createCampaignActivities({
        pool,
        sinkDir,
        sinkKeep: 2,
        executor: {} as never,
        temporal: {} as never,
      });
      for (let v = 1; v <= 5; v++) await a.deliverPoolJsonl({ campaignId, version: v });
      const dir = path.join(sinkDir, campaignId);
      expect((await readdir(dir)).sort()).toEqual(['current.jsonl', 'pool-v4.jsonl', 'pool-v5.jsonl']);
      // A file left by a crash between a write and its pruning goes with the next delivery.
      await writeFile(path.join(dir, 'pool-v3.jsonl'), '');
      await a.deliverPoolJsonl({ campaignId, version: 6 });
      expect((await readdir(dir)).sort()).toEqual(['current.jsonl', 'pool-v5.jsonl', 'pool-v6.jsonl']);
      // the campaign has no members: every file is an empty pool
      expect(await readFile(path.join(dir, 'current.jsonl'), 'utf8')).toBe('');
    } finally {
      await rm(sinkDir, { recursive: true, force: true });
    }
  });
});
