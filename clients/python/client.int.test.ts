// The Python client (clients/python/rods_client/, standard library only) against the real
// gateway with an in-process rods worker.
import { execFile } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import type { Client } from '@temporalio/client';
import { bundleWorkflowCode, type Worker } from '@temporalio/worker';
import type { FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { freshRewardTopic } from '../../aggregator/trace.js';
import { TokenSet } from '../../gateway/auth.js';
import { buildGateway } from '../../gateway/server.js';
import { withAdmin } from '../../kafka/client.js';
import { createPool, type Pool } from '../../store/db.js';
import { installWorkerRuntime, temporalClient } from '../../temporal/connect.js';
import { createRodsWorker } from '../../temporal/worker.js';

const execFileP = promisify(execFile);
const TOKEN = `tok-${randomUUID()}`;
const taskQueue = `py-client-${randomUUID().slice(0, 8)}`;
const campaignId = `py-${randomUUID().slice(0, 8)}`;
let db: Pool;
let client: Client;
let closeClient: () => Promise<void>;
let worker: { worker: Worker; close: () => Promise<void>; running: Promise<void> };
let app: FastifyInstance;
let base: string;
let topic: string;

beforeAll(async () => {
  await installWorkerRuntime('WARN');
  const bundle = await bundleWorkflowCode({
    workflowsPath: fileURLToPath(new URL('../../workflows/index.ts', import.meta.url)),
  });
  db = createPool({ application: 'rods-py-client-test', max: 6 });
  topic = await freshRewardTopic('py.rewards', 1);
  const w = await createRodsWorker({
    pool: db,
    taskQueue,
    workflowBundle: bundle,
    sinkDir: '.stack/test-sink',
  });
  worker = { ...w, running: w.worker.run() };
  ({ client, close: closeClient } = await temporalClient());
  app = buildGateway({ db, temporal: client, tokens: new TokenSet([TOKEN]), taskQueue, rewardsTopic: topic });
  base = await app.listen({ port: 0, host: '127.0.0.1' });
  const created = await fetch(`${base}/v1/campaigns`, {
    method: 'POST',
    headers: { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json' },
    body: JSON.stringify({ campaignId, config: { seeds: { perCategory: 2 } } }),
  });
  expect(created.status).toBe(201);
}, 180_000);

afterAll(async () => {
  await client?.workflow
    .getHandle(`campaign-${campaignId}`)
    .terminate('test over')
    .catch(() => {});
  await app?.close();
  if (worker) {
    worker.worker.shutdown();
    await worker.running;
    await worker.close();
  }
  await closeClient?.();
  if (topic) await withAdmin((a) => a.deleteTopics([topic])).catch(() => {});
  await db?.end();
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
