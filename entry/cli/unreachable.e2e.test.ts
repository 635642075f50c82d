// With a service down, a command says which service does not answer, at which endpoint, which
// variable sets it and the command that starts it. Each case points one endpoint at a closed
// port, so the shared stack is not touched.
import { spawn } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { registerCampaign } from '../../platform/store/campaigns.js';
import { createPool } from '../../platform/store/db.js';
import { freePort } from '../../platform/util/free-port.js';
import { ROOT } from '../../test/support/sources.js';

function rods(args: string[], env: Record<string, string>): Promise<{ code: number | null; stderr: string }> {
  return new Promise((resolve) => {
    let stderr = '';
    const child = spawn(process.execPath, [path.join(ROOT, 'bin/rods.mjs'), ...args], {
      cwd: ROOT,
      env: { ...process.env, ...env },
      stdio: ['ignore', 'ignore', 'pipe'],
    });
    child.stderr?.on('data', (d) => {
      stderr += d;
    });
    child.on('exit', (code) => resolve({ code, stderr }));
  });
}

const campaignId = `unreachable-${randomUUID().slice(0, 8)}`;
const db = createPool({ application: 'rods-unreachable-test', max: 1 });

beforeAll(async () => {
  await registerCampaign(db, { campaignId, config: {} });
});
afterAll(async () => {
  await db.end();
});

describe('a command with a service down', () => {
  it.concurrent('PostgreSQL: names it, its endpoint, DATABASE_URL and npm run stack:up', async () => {
    const port = await freePort();
    const r = await rods(['pool', '--campaign', 'x'], {
      DATABASE_URL: `postgres://rods:not-this-password@127.0.0.1:${port}/rods`,
    });
    expect(r.code).toBe(1);
    expect(r.stderr).toContain(`rods: PostgreSQL does not answer at 127.0.0.1:${port} (set by DATABASE_URL)`);
    expect(r.stderr).toContain('`npm run stack:up`');
    expect(r.stderr).not.toContain('not-this-password');
  });

  it.concurrent('Kafka: names it, its endpoint and KAFKA_BROKERS', async () => {
    const port = await freePort();
    const r = await rods(['topics', 'ensure'], { KAFKA_BROKERS: `127.0.0.1:${port}` });
    expect(r.code).toBe(1);
    expect(r.stderr).toContain(`rods: Kafka does not answer at 127.0.0.1:${port} (set by KAFKA_BROKERS)`);
    expect(r.stderr).toContain('`npm run stack:up`');
  }, 180_000);

  it.concurrent('Temporal: names it, its endpoint and TEMPORAL_ADDRESS', async () => {
    const port = await freePort();
    const r = await rods(['campaign', 'pause', campaignId], { TEMPORAL_ADDRESS: `127.0.0.1:${port}` });
    expect(r.code).toBe(1);
    expect(r.stderr).toContain(
      `rods: Temporal does not answer at 127.0.0.1:${port} (set by TEMPORAL_ADDRESS)`,
    );
    expect(r.stderr).toContain('`npm run stack:up`');
  }, 180_000);
});
