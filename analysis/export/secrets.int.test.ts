// `rods export` of a campaign recorded before generator endpoints existed: the CampaignStarted and
// CampaignReconfigured configs are exported without their generator URL, key and headers.
import { randomUUID } from 'node:crypto';
import { mkdtempSync, readdirSync, readFileSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { withNewCampaignSettings } from '../../domain/campaign-config.js';
import { registerCampaign } from '../../platform/store/campaigns.js';
import { createPool, type Pool } from '../../platform/store/db.js';
import { exportCampaign } from './export.js';

const KEY = `sk-canary-${randomUUID()}`;
let pool: Pool;
const dir = mkdtempSync(path.join(tmpdir(), 'rods-export-secrets-'));

const filesUnder = (d: string): string[] =>
  readdirSync(d).flatMap((f) => {
    const p = path.join(d, f);
    return statSync(p).isDirectory() ? filesUnder(p) : [p];
  });

beforeAll(() => {
  pool = createPool({ application: 'rods-export-secrets-test', max: 2 });
});

afterAll(async () => {
  await pool?.end();
  rmSync(dir, { recursive: true, force: true });
});

describe('rods export of an old config', () => {
  it('leaves out the generator URL, key and headers in every format, keeping the rest', async () => {
    const campaignId = `exs-${randomUUID().slice(0, 8)}`;
    await registerCampaign(pool, {
      campaignId,
      config: {
        notes: 'kept',
        generator: { baseUrl: 'http://old-vllm:8000/v1', apiKey: KEY, headers: { 'x-k': KEY }, model: 'm' },
      },
    });
    for (const format of ['jsonl', 'csv'] as const) {
      const out = path.join(dir, format);
      await exportCampaign(pool, { campaignId, format, out });
      const text = filesUnder(out)
        .map((f) => readFileSync(f, 'utf8'))
        .join('\n');
      expect(text).toContain('CampaignStarted');
      expect(text).toContain('kept');
      expect(text).not.toContain(KEY);
      expect(text).not.toContain('old-vllm');
    }
    const line = readFileSync(path.join(dir, 'jsonl', 'events', 'CampaignStarted.jsonl'), 'utf8').trim();
    const config = JSON.parse((JSON.parse(line) as { payload: { config: string } }).payload.config);
    // The rest as recorded: with the settings a campaign registered now records explicitly.
    expect(config).toEqual(withNewCampaignSettings({ notes: 'kept', generator: { model: 'm' } }));
  });
});
