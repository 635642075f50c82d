// A batch the gateway committed while Temporal was away (its ingestion workflow never started)
// and that the trainer never sends again: without the reconciler it stays unpublished and its
// step never closes; the reconciler of a gateway publishes it and the step closes, with its
// groups counted once. Real PostgreSQL, Kafka and Temporal: a worker, an aggregator and the
// campaign workflow run in this process (dev/harness/loop.ts); the Temporal that is away is a
// client on a closed port.
import { randomUUID } from 'node:crypto';
import { fileURLToPath } from 'node:url';
import { Client, Connection } from '@temporalio/client';
import { bundleWorkflowCode, Runtime } from '@temporalio/worker';
import type { FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { LoopHarness } from '../../dev/harness/loop.js';
import { unpublishedBatches } from '../../platform/store/steps/batches.js';
import { installWorkerRuntime, workflowExists } from '../../platform/temporal/connect.js';
import { freePort } from '../../platform/util/free-port.js';
import { staysFalse, waitUntil } from '../../test/support/wait.js';
import { TokenSet } from './auth.js';
import { BatchReconciler } from './reconcile.js';
import { buildGateway } from './server.js';

const TOKEN = `tok-${randomUUID()}`;
const AUTH = { authorization: `Bearer ${TOKEN}` };
let loop: LoopHarness;
let down: { client: Client; connection: Connection };
const apps: FastifyInstance[] = [];

beforeAll(async () => {
  await installWorkerRuntime('WARN');
  const workflowBundle = await bundleWorkflowCode({
    logger: Runtime.instance().logger,
    workflowsPath: fileURLToPath(new URL('../../workflows/index.ts', import.meta.url)),
  });
  loop = await LoopHarness.stepsOnly('reconcile', workflowBundle);
  // Temporal "down": a closed port, and no gRPC retries so each call fails at once.
  const connection = Connection.lazy({ address: `127.0.0.1:${await freePort()}`, interceptors: [] });
  down = { client: new Client({ connection }), connection };
}, 180_000);

afterAll(async () => {
  for (const app of apps) await app.close().catch(() => {});
  await down?.connection.close().catch(() => {});
  if (loop) {
    await loop.terminateIngestions();
    await loop.close();
  }
});

function gateway(client: Client, reconcile?: { intervalMs: number; graceMs: number }): FastifyInstance {
  const app = buildGateway({
    db: loop.pool,
    temporal: client,
    tokens: new TokenSet([TOKEN]),
    taskQueue: loop.taskQueue,
    rewardsTopic: loop.topic,
    ...(reconcile ? { reconcile: { ...reconcile, campaigns: [loop.campaignId] } } : {}),
  });
  apps.push(app);
  return app;
}

async function step1(): Promise<{ declared: number | null; closed: boolean } | undefined> {
  const { rows } = await loop.pool.query<{ declared_groups: number | null; closed: boolean }>(
    'select declared_groups, closed_at is not null as closed from steps where campaign_id = $1 and step = 1',
    [loop.campaignId],
  );
  return rows[0] ? { declared: rows[0].declared_groups, closed: rows[0].closed } : undefined;
}

async function batchStatus(): Promise<string | undefined> {
  const { rows } = await loop.pool.query<{ status: string }>(
    "select status from ingestion_batches where campaign_id = $1 and step = 1 and batch_id = 'b1'",
    [loop.campaignId],
  );
  return rows[0]?.status;
}

describe('batch reconciler', () => {
  it('publishes a batch whose ingestion never started, and its step closes', async () => {
    const c = loop.campaignId;
    const workflowId = `ingest:${c}:1:b1`;
    const batch = {
      batchId: 'b1',
      policyVersion: 'ckpt-1',
      groups: [
        { taskId: 't1', rewards: [0, 0.5, 1, 0.5] },
        { taskId: 't2', rewards: [0.25, 0.75] },
      ],
      close: true,
    };

    // Committed, then the start fails: 503, and the trainer never sends it again.
    const refused = await gateway(down.client).inject({
      method: 'POST',
      url: `/v1/campaigns/${c}/steps/1/rollouts`,
      headers: AUTH,
      payload: batch,
    });
    expect(refused.statusCode).toBe(503);
    expect(await batchStatus()).toBe('accepted');
    expect(await workflowExists(loop.client, workflowId)).toBe(false);

    // A reconciler whose Temporal is away fails its ticks, keeps ticking and never throws out.
    const blind = new BatchReconciler({
      db: loop.pool,
      temporal: down.client,
      taskQueue: loop.taskQueue,
      rewardsTopic: loop.topic,
      intervalMs: 20,
      graceMs: 0,
      campaigns: [c],
    });
    await expect(blind.tick()).rejects.toThrow();
    blind.start();
    await waitUntil(() => blind.failures >= 3, { what: 'three failed ticks' });
    await blind.stop();

    // Without a reconciler that reaches Temporal nothing publishes it: the worker, aggregator
    // and campaign run, the step stays open and the batch counts as unpublished.
    await staysFalse(
      async () => (await batchStatus()) !== 'accepted' || (await step1())?.closed === true,
      3000,
      {
        what: 'the batch published or step 1 closed with no reconciler',
        intervalMs: 200,
      },
    );
    expect(await workflowExists(loop.client, workflowId)).toBe(false);
    const before = await unpublishedBatches(loop.pool, c);
    expect(before).toMatchObject({ count: 1, groups: 2, oldestStep: 1 });
    expect(before.batches).toEqual([
      expect.objectContaining({ step: 1, batchId: 'b1', closes: true, workflowId }),
    ]);
    expect(before.oldestAgeMs).toBeGreaterThanOrEqual(0);
    expect((await unpublishedBatches(loop.pool, c, { olderThanMs: 3_600_000 })).count).toBe(0);

    // A gateway with its reconciler (as `rods gateway` runs it) publishes it on startup.
    const healthy = gateway(loop.client, { intervalMs: 200, graceMs: 1000 });
    await healthy.ready();
    const closed = await waitUntil(async () => ((await step1())?.closed ? step1() : undefined), {
      what: () => `step 1 of ${c} to close`,
      timeoutMs: 90_000,
      intervalMs: 200,
    });
    expect(closed).toEqual({ declared: 2, closed: true });
    expect(await batchStatus()).toBe('published');
    const { rows: stats } = await loop.pool.query<{ task_id: string; groups: number; rollouts: number }>(
      'select task_id, groups, rollouts from task_stats where campaign_id = $1 order by task_id',
      [c],
    );
    expect(stats).toEqual([
      { task_id: 't1', groups: 1, rollouts: 4 },
      { task_id: 't2', groups: 1, rollouts: 2 },
    ]);
    // The campaign moves on: it plans step 1.
    expect((await loop.waitPlanned(1)).step).toBeGreaterThanOrEqual(1);
    expect(await unpublishedBatches(loop.pool, c)).toMatchObject({ count: 0, oldestStep: null, batches: [] });

    // A late re-send by the trainer is the same batch, and later ticks start nothing.
    const again = await healthy.inject({
      method: 'POST',
      url: `/v1/campaigns/${c}/steps/1/rollouts`,
      headers: AUTH,
      payload: batch,
    });
    expect(again.statusCode).toBe(200);
    const after = new BatchReconciler({
      db: loop.pool,
      temporal: loop.client,
      taskQueue: loop.taskQueue,
      graceMs: 0,
      campaigns: [c],
    });
    expect(await after.tick()).toEqual({ started: [], running: 0, skipped: [] });
  }, 180_000);
});
