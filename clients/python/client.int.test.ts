// The Python client (clients/python/rods_client/, standard library only) against the real
// gateway with an in-process rods worker.
import { execFile } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  type GatewayWithWorker,
  startGatewayWithWorker,
} from '../../test/support/gateway/gateway-with-worker.js';

const execFileP = promisify(execFile);
const TOKEN = `tok-${randomUUID()}`;
const campaignId = `py-${randomUUID().slice(0, 8)}`;
let gw: GatewayWithWorker;
let base: string;

beforeAll(async () => {
  gw = await startGatewayWithWorker({
    application: 'rods-py-client-test',
    tokens: [TOKEN],
    name: 'py-client',
  });
  base = gw.base;
  const created = await fetch(`${base}/v1/campaigns`, {
    method: 'POST',
    headers: { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json' },
    body: JSON.stringify({ campaignId, config: { seeds: { perCategory: 2 } } }),
  });
  expect(created.status).toBe(201);
}, 180_000);

afterAll(async () => {
  await gw?.close([`campaign-${campaignId}`]);
});

describe('Python client', () => {
  it('reports steps, fetches the pool with ETag caching and samples batches against the real gateway', async () => {
    const { stdout } = await execFileP(
      'python3',
      [fileURLToPath(new URL('./check_client.py', import.meta.url))],
      {
        env: { ...process.env, RODS_GATEWAY_URL: base, RODS_TOKEN: TOKEN, RODS_CAMPAIGN: campaignId },
        timeout: 120_000,
      },
    );
    const seen = JSON.parse(stdout.trim().split('\n').pop()!);
    expect(seen.tasks).toBe(8);
    expect(seen.version).toBeGreaterThan(0);
    expect(seen.cached_same_object).toBe(true);
    expect(seen.first_report).toEqual({ duplicate: false, groups: 8 });
    expect(seen.second_report_duplicate).toBe(true);
    expect(seen.bad_reward.status).toBe(422);
    expect(seen.bad_reward.fields).toContain('groups[0].rewards[1]');
    expect(seen.batch_size).toBe(5);
    expect(seen.batch_deterministic).toBe(true);
    expect(seen.wrong_token).toBe(403);
  }, 180_000);
});
