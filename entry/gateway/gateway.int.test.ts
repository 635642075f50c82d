// The gateway through fastify's inject(): auth, every problem+json error, idempotent batch
// acceptance, the pool's ETag / If-None-Match / long-poll and seeded sampling. No worker runs
// on this file's task queue (publication is proven in ingestion.int.test.ts); the workflows it
// starts are terminated at the end.
import { randomUUID } from 'node:crypto';
import type { Client } from '@temporalio/client';
import type { FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { bfclTaskId } from '../../domain/ids.js';
import { registerCampaign } from '../../platform/store/campaigns.js';
import type { Pool } from '../../platform/store/db.js';
import { readStoredRolloutBatch, type StoredRolloutBatch } from '../../platform/store/steps/batches.js';
import {
  type GatewayUnderTest,
  startGatewayUnderTest,
} from '../../test/support/gateway/gateway-under-test.js';
import { waitUntil } from '../../test/support/wait.js';
import { TokenSet } from './auth.js';
import { buildGateway } from './server.js';

// These tests report rewards for tasks of their own: the campaign counts any task id.
const ACCEPT_ANY_TASK = { ingestion: { unknownTasks: 'accept' } };

const TOKEN = `tok-${randomUUID()}`;
const AUTH = { authorization: `Bearer ${TOKEN}` };
const taskQueue = `gateway-test-${randomUUID().slice(0, 8)}`;
let db: Pool;
let client: Client;
let gateway: GatewayUnderTest;
let app: FastifyInstance;
const campaigns: string[] = [];

async function newCampaign(): Promise<string> {
  const id = `gw-${randomUUID().slice(0, 8)}`;
  await registerCampaign(db, { campaignId: id, config: ACCEPT_ANY_TASK });
  campaigns.push(id);
  return id;
}

const batchUrl = (c: string, step: number) => `/v1/campaigns/${c}/steps/${step}/rollouts`;
const post = (url: string, payload: unknown, headers: Record<string, string> = AUTH) =>
  app.inject({ method: 'POST', url, payload: payload as Record<string, unknown>, headers });
const get = (url: string, headers: Record<string, string> = AUTH) =>
  app.inject({ method: 'GET', url, headers });

function expectProblem(
  res: { statusCode: number; headers: Record<string, unknown>; json: () => unknown },
  status: number,
) {
  expect(res.statusCode).toBe(status);
  expect(String(res.headers['content-type'])).toMatch(/^application\/problem\+json/);
  const body = res.json() as {
    type: string;
    title: string;
    status: number;
    detail: string;
    errors?: unknown[];
  };
  expect(body.status).toBe(status);
  expect(body.type).toMatch(/^urn:rods:problem:/);
  expect(body.title.length).toBeGreaterThan(0);
  expect(body.detail.length).toBeGreaterThan(0);
  return body;
}

async function batchRows(campaignId: string): Promise<number> {
  const { rows } = await db.query<{ n: number }>(
    'select count(*)::int as n from ingestion_batches where campaign_id = $1',
    [campaignId],
  );
  return rows[0]!.n;
}

beforeAll(async () => {
  gateway = await startGatewayUnderTest({
    application: 'rods-gateway-test',
    tokens: [TOKEN, 'other-token'],
    taskQueue,
  });
  ({ db, client, app } = gateway);
});

afterAll(async () => {
  await gateway?.close(campaigns);
});

describe('open endpoints and auth', () => {
  it('serves /openapi.json and /healthz without a token', async () => {
    const doc = (await get('/openapi.json', {})).json() as { openapi: string; paths: Record<string, object> };
    expect(doc.openapi).toBe('3.0.3');
    expect(Object.keys(doc.paths)).toEqual(
      expect.arrayContaining([
        '/v1/campaigns',
        '/v1/campaigns/{id}',
        '/v1/campaigns/{id}/steps/{step}/rollouts',
        '/v1/campaigns/{id}/pool',
        '/v1/campaigns/{id}/batch',
      ]),
    );
    const rb = (doc as unknown as { components: { schemas: Record<string, { required: string[] }> } })
      .components.schemas.RolloutBatch!;
    expect(rb.required).toEqual(expect.arrayContaining(['batchId', 'policyVersion', 'groups']));
    const reward = (
      rb as unknown as { properties: { groups: { items: { properties: { rewards: { items: object } } } } } }
    ).properties.groups.items.properties.rewards.items;
    expect(reward).toEqual({ type: 'number', minimum: 0, maximum: 1 });
    expect((await get('/healthz', {})).json()).toEqual({ ok: true });
  });

  it('refuses a missing token with 401 and a wrong one with 403', async () => {
    const c = await newCampaign();
    const missing = await get(`/v1/campaigns/${c}/pool`, {});
    expectProblem(missing, 401);
    expect(missing.headers['www-authenticate']).toMatch(/^Bearer/);
    expectProblem(await get(`/v1/campaigns/${c}/pool`, { authorization: `Basic ${TOKEN}` }), 401);
    expectProblem(await get(`/v1/campaigns/${c}/pool`, { authorization: `Bearer ${TOKEN}x` }), 403);
    expectProblem(await get(`/v1/campaigns/${c}/pool`, { authorization: 'Bearer x' }), 403);
    expect((await get(`/v1/campaigns/${c}/pool`, { authorization: 'Bearer other-token' })).statusCode).toBe(
      200,
    );
    expect((await get(`/v1/campaigns/${c}/pool`)).statusCode).toBe(200);
    // An unauthenticated write changes nothing.
    expectProblem(
      await post(
        batchUrl(c, 1),
        { batchId: 'b', policyVersion: 'p', groups: [{ taskId: 't', rewards: [1] }] },
        {},
      ),
      401,
    );
    expect(await batchRows(c)).toBe(0);
  });

  it('refuses an empty token list', () => {
    expect(() => new TokenSet([' ', ''])).toThrow(/at least one/);
  });
});

describe('campaigns', () => {
  it('404 for an unknown campaign on every route', async () => {
    const c = `gw-missing-${randomUUID().slice(0, 8)}`;
    for (const res of [
      await get(`/v1/campaigns/${c}`),
      await get(`/v1/campaigns/${c}/pool`),
      await get(`/v1/campaigns/${c}/batch?n=1`),
      await post(batchUrl(c, 1), {
        batchId: 'b1',
        policyVersion: 'p',
        groups: [{ taskId: 't', rewards: [0.5] }],
      }),
    ]) {
      expect(expectProblem(res, 404).type).toBe('urn:rods:problem:unknown-campaign');
    }
    expect(await batchRows(c)).toBe(0);
  });

  it('409 when the campaign exists, 422 naming the bad config field', async () => {
    const c = await newCampaign();
    // Another config for a registered id (the same one would start its missing workflow).
    expectProblem(await post('/v1/campaigns', { campaignId: c, config: { pool: { generatedCap: 1 } } }), 409);
    const fresh = `gw-${randomUUID().slice(0, 8)}`;
    const bad = expectProblem(
      await post('/v1/campaigns', { campaignId: fresh, config: { pool: { generatedCap: -1 } } }),
      422,
    );
    expect(bad.errors).toEqual(
      expect.arrayContaining([expect.objectContaining({ field: 'config.pool.generatedCap' })]),
    );
    const badId = expectProblem(await post('/v1/campaigns', { campaignId: 'no spaces', config: {} }), 422);
    expect(badId.errors).toEqual([expect.objectContaining({ field: 'campaignId' })]);
    const { rows } = await db.query('select 1 from campaigns where campaign_id = $1', [fresh]);
    expect(rows).toHaveLength(0);
  });
});

describe('rollout batches', () => {
  it('422 names each bad reward and writes nothing', async () => {
    const c = await newCampaign();
    const groups = [
      { taskId: 't0', rewards: [0.1] },
      { taskId: 't1', rewards: [0.2] },
      { taskId: 't2', rewards: [0.3] },
      { taskId: 't3', rewards: [0, 1, 1.5, null, '0.5', -0.1] },
    ];
    const res = await post(batchUrl(c, 1), { batchId: 'b1', policyVersion: 'p1', groups });
    const body = expectProblem(res, 422);
    expect(body.errors!.map((e) => (e as { field: string }).field)).toEqual([
      'groups[3].rewards[2]',
      'groups[3].rewards[3]',
      'groups[3].rewards[4]',
      'groups[3].rewards[5]',
    ]);
    expect(body.detail).toContain('groups[3].rewards[2]');
    const more = expectProblem(
      await post(batchUrl(c, 1), {
        batchId: 'b1',
        policyVersion: 'p1',
        groups: [
          { taskId: 'a', rewards: [] },
          { taskId: 'a', rewards: [0.5] },
        ],
        extra: 1,
      }),
      422,
    );
    expect(more.errors!.map((e) => (e as { field: string }).field).sort()).toEqual(
      ['extra', 'groups[0].rewards', 'groups[1].taskId'].sort(),
    );
    expect(
      expectProblem(await post(batchUrl(c, -1), { batchId: 'b', policyVersion: 'p', groups: [] }), 422)
        .errors,
    ).toEqual(expect.arrayContaining([expect.objectContaining({ field: 'step' })]));
    expect(await batchRows(c)).toBe(0);
  });

  it('400 for malformed JSON, 413 over the body limit', async () => {
    const c = await newCampaign();
    const res = await app.inject({
      method: 'POST',
      url: batchUrl(c, 1),
      headers: { ...AUTH, 'content-type': 'application/json' },
      payload: '{"batchId": "b1", "groups": [',
    });
    expectProblem(res, 400);
    const text = await app.inject({
      method: 'POST',
      url: batchUrl(c, 1),
      headers: { ...AUTH, 'content-type': 'text/plain' },
      payload: 'batchId=b1',
    });
    expectProblem(text, 415);
    const small = buildGateway({
      db,
      temporal: client,
      tokens: new TokenSet([TOKEN]),
      taskQueue,
      bodyLimit: 1024,
    });
    try {
      const big = {
        batchId: 'big',
        policyVersion: 'p',
        groups: Array.from({ length: 100 }, (_, i) => ({ taskId: `t${i}`, rewards: [0.5, 0.25] })),
      };
      expect(JSON.stringify(big).length).toBeGreaterThan(1024);
      expectProblem(
        await small.inject({ method: 'POST', url: batchUrl(c, 1), headers: AUTH, payload: big }),
        413,
      );
    } finally {
      await small.close();
    }
    expect(await batchRows(c)).toBe(0);
  });

  it('a duplicate POST returns the first result with duplicate: true; another body under its id is a 409', async () => {
    const c = await newCampaign();
    const batch = { batchId: 'b1', policyVersion: 'p1', groups: [{ taskId: 't1', rewards: [0.5, 1] }] };
    const first = await post(batchUrl(c, 3), batch);
    expect(first.statusCode).toBe(202);
    // This gateway has no direct publish: the batch goes through its ingestion workflow.
    expect(first.json()).toEqual({
      workflowId: `ingest:${c}:3:b1`,
      groups: 1,
      close: false,
      duplicate: false,
      published: false,
    });
    const changed = await post(batchUrl(c, 3), {
      ...batch,
      groups: [...batch.groups, { taskId: 't2', rewards: [0] }],
    });
    expect(expectProblem(changed, 409).type).toBe('urn:rods:problem:batch-conflict');
    // The same body, keys in another order and `close: false` spelt out, is the duplicate.
    const again = await post(batchUrl(c, 3), {
      groups: [{ rewards: [0.5, 1.0], taskId: 't1' }],
      close: false,
      policyVersion: 'p1',
      batchId: 'b1',
    });
    expect(again.statusCode).toBe(200);
    expect(again.json()).toEqual({
      workflowId: `ingest:${c}:3:b1`,
      groups: 1,
      close: false,
      duplicate: true,
      published: false,
    });
    expect(await batchRows(c)).toBe(1);
    const desc = await client.workflow.getHandle(`ingest:${c}:3:b1`).describe();
    expect(desc.taskQueue).toBe(taskQueue);
    const { rows } = await db.query<{ body: StoredRolloutBatch }>(
      'select c.body from claim_checks c join ingestion_batches b using (claim_id) where b.campaign_id = $1',
      [c],
    );
    expect(readStoredRolloutBatch(rows[0]!.body)).toMatchObject({ batchId: 'b1', groups: batch.groups });
  });

  it('a batch whose workflow could not start gets it on the retry (503, then 202)', async () => {
    const c = await newCampaign();
    const down = {
      workflow: {
        start: async () => {
          throw new Error('temporal unavailable');
        },
      },
    } as unknown as Client;
    const broken = buildGateway({ db, temporal: down, tokens: new TokenSet([TOKEN]), taskQueue });
    const batch = { batchId: 'r1', policyVersion: 'p', groups: [{ taskId: 't', rewards: [0.5] }] };
    try {
      const res = await broken.inject({ method: 'POST', url: batchUrl(c, 2), headers: AUTH, payload: batch });
      expect(expectProblem(res, 503).detail).toMatch(/retry/);
    } finally {
      await broken.close();
    }
    await expect(client.workflow.getHandle(`ingest:${c}:2:r1`).describe()).rejects.toThrow();
    const retry = await post(batchUrl(c, 2), batch);
    expect(retry.statusCode).toBe(202);
    expect(retry.json()).toMatchObject({ workflowId: `ingest:${c}:2:r1`, duplicate: false });
    expect((await client.workflow.getHandle(`ingest:${c}:2:r1`).describe()).taskQueue).toBe(taskQueue);
    expect((await post(batchUrl(c, 2), batch)).statusCode).toBe(200);
    expect(await batchRows(c)).toBe(1);
  });

  it('409 for a step already closed by a batch or in the steps table', async () => {
    const c = await newCampaign();
    const closing = await post(batchUrl(c, 1), {
      batchId: 'last',
      policyVersion: 'p',
      groups: [{ taskId: 't', rewards: [0.5] }],
      close: true,
    });
    expect(closing.statusCode).toBe(202);
    const late = await post(batchUrl(c, 1), {
      batchId: 'late',
      policyVersion: 'p',
      groups: [{ taskId: 'u', rewards: [1] }],
    });
    expect(expectProblem(late, 409).type).toBe('urn:rods:problem:step-closed');
    // The closing batch itself, sent again, is a duplicate, not a conflict.
    expect(
      (
        await post(batchUrl(c, 1), {
          batchId: 'last',
          policyVersion: 'p',
          groups: [{ taskId: 't', rewards: [0.5] }],
          close: true,
        })
      ).statusCode,
    ).toBe(200);
    await db.query(
      'insert into steps (campaign_id, step, declared_groups, closed_at) values ($1, 7, 3, now())',
      [c],
    );
    expectProblem(
      await post(batchUrl(c, 7), {
        batchId: 'x',
        policyVersion: 'p',
        groups: [{ taskId: 't', rewards: [1] }],
      }),
      409,
    );
    expect(await batchRows(c)).toBe(1);
  });
});

describe('pool', () => {
  async function seedPool(c: string, version: number, tasks: string[]): Promise<void> {
    for (const t of tasks)
      await db.query(
        `insert into pool_members (campaign_id, task_id, origin, category, task, task_hash, root_seed, added_step, added_version)
         values ($1, $2, 'seed', 'base', $3, 'h', $2, 0, $4) on conflict do nothing`,
        [c, t, JSON.stringify({ id: t, question: [] }), version],
      );
    await db.query(
      `insert into pool_versions (campaign_id, version, step) values ($1, $2, 0)
       on conflict (campaign_id) do update set version = excluded.version`,
      [c, version],
    );
  }

  it('serves the active pool with its version as ETag and honours If-None-Match', async () => {
    const c = await newCampaign();
    await seedPool(c, 3, ['a', 'b', 'c']);
    await db.query('update pool_members set active = false where campaign_id = $1 and task_id = $2', [
      c,
      'c',
    ]);
    const res = await get(`/v1/campaigns/${c}/pool`);
    expect(res.statusCode).toBe(200);
    expect(res.headers.etag).toBe('"3"');
    const body = res.json() as { version: number; tasks: { taskId: string; task: { id: string } }[] };
    expect(body.version).toBe(3);
    expect(body.tasks.map((t) => t.taskId)).toEqual(['a', 'b']);
    // The record carries a BFCL id (bfcl-eval parses the category and index from it) and the rods id.
    expect(body.tasks[0]!.task).toMatchObject({ id: bfclTaskId('a', 'base'), rods_task_id: 'a' });
    expect(body.tasks[0]!.task.id).toMatch(/^multi_turn_base_\d+$/);
    const same = await get(`/v1/campaigns/${c}/pool`, { ...AUTH, 'if-none-match': '"3"' });
    expect(same.statusCode).toBe(304);
    expect(same.headers.etag).toBe('"3"');
    expect(same.body).toBe('');
    expect((await get(`/v1/campaigns/${c}/pool`, { ...AUTH, 'if-none-match': '"2"' })).statusCode).toBe(200);
    expect((await get(`/v1/campaigns/${c}/pool`, { ...AUTH, 'if-none-match': 'W/"3"' })).statusCode).toBe(
      304,
    );
    expectProblem(await get(`/v1/campaigns/${c}/pool?wait=abc`), 422);
    expectProblem(await get(`/v1/campaigns/${c}/pool?wait=100000`), 422);
  });

  it('long-polls until a newer version appears', async () => {
    const c = await newCampaign();
    await seedPool(c, 1, ['a']);
    // Count the gateway's reads of this campaign's pool version: a read after the first one means
    // the request is holding and polling (not answered), which is what is checked before the
    // newer version appears.
    let versionReads = 0;
    const query = db.query.bind(db) as (...args: unknown[]) => unknown;
    const spy = vi.spyOn(db, 'query').mockImplementation(((...args: unknown[]) => {
      const [sql, params] = args;
      if (typeof sql === 'string' && sql.includes('from pool_versions') && (params as unknown[])?.[0] === c)
        versionReads++;
      return query(...args);
    }) as never);
    let settled = false;
    const pending = get(`/v1/campaigns/${c}/pool?wait=60`, { ...AUTH, 'if-none-match': '"1"' }).then((r) => {
      settled = true;
      return r;
    });
    try {
      await waitUntil(() => settled || versionReads >= 3, {
        what: () => `the long-poll to re-read the pool version (${versionReads} reads)`,
      });
    } finally {
      spy.mockRestore();
    }
    expect(settled).toBe(false);
    await seedPool(c, 2, ['b']);
    const res = await pending;
    expect(res.statusCode).toBe(200);
    expect(res.headers.etag).toBe('"2"');
    expect((res.json() as { tasks: { taskId: string }[] }).tasks.map((t) => t.taskId)).toEqual(['a', 'b']);
  });

  it('a long-poll that sees no new version ends with 304', async () => {
    const c = await newCampaign();
    await seedPool(c, 5, ['a']);
    const res = await get(`/v1/campaigns/${c}/pool?wait=1`, { ...AUTH, 'if-none-match': '"5"' });
    expect(res.statusCode).toBe(304);
    expect(res.headers.etag).toBe('"5"');
  });

  it('samples n tasks with replacement, deterministically for a seed', async () => {
    const c = await newCampaign();
    expectProblem(await get(`/v1/campaigns/${c}/batch?n=2`), 409);
    await seedPool(c, 1, ['a', 'b', 'c', 'd']);
    const one = (await get(`/v1/campaigns/${c}/batch?n=50&seed=s1`)).json() as {
      tasks: { taskId: string }[];
      version: number;
      seed: string;
    };
    const two = (await get(`/v1/campaigns/${c}/batch?n=50&seed=s1`)).json() as typeof one;
    expect(one.tasks).toHaveLength(50);
    expect(one.version).toBe(1);
    expect(one.seed).toBe('s1');
    expect(two.tasks.map((t) => t.taskId)).toEqual(one.tasks.map((t) => t.taskId));
    expect(new Set(one.tasks.map((t) => t.taskId)).size).toBeGreaterThan(1);
    expect(new Set(one.tasks.map((t) => t.taskId)).size).toBeLessThanOrEqual(4);
    const other = (await get(`/v1/campaigns/${c}/batch?n=50&seed=s2`)).json() as typeof one;
    expect(other.tasks.map((t) => t.taskId)).not.toEqual(one.tasks.map((t) => t.taskId));
    for (const q of ['', '?n=0', '?n=-1', '?n=abc', '?n=1000001'])
      expect(expectProblem(await get(`/v1/campaigns/${c}/batch${q}`), 422).errors).toEqual([
        expect.objectContaining({ field: 'n' }),
      ]);
  });
});
