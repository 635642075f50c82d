// Scoped tokens and per-token limits, against the gateway with a real PostgreSQL and Temporal:
// tokens read from a tokens file, 403 naming the missing scope (another campaign's token, a
// campaign token creating a campaign, a read token posting), 429 with Retry-After for a burst and
// for too many long-polls, the caps on `n` and on the bytes of a /batch answer, 409 for a batch id
// sent again with another body, and RODS_GATEWAY_TOKENS kept working as admin tokens.
import { randomUUID } from 'node:crypto';
import { chmodSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import type { FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadCampaign, registerCampaign } from '../../platform/store/campaigns.js';
import type { Pool } from '../../platform/store/db.js';
import {
  type GatewayUnderTest,
  startGatewayUnderTest,
} from '../../test/support/gateway/gateway-under-test.js';
import { waitUntil } from '../../test/support/wait.js';
import { loadTokens } from './auth.js';

// These tests report rewards for tasks of their own: the campaign counts any task id.
const ACCEPT_ANY_TASK = { ingestion: { unknownTasks: 'accept' } };

const u = () => randomUUID().replaceAll('-', '');
const A = `acc-a-${randomUUID().slice(0, 8)}`;
const B = `acc-b-${randomUUID().slice(0, 8)}`;
const T = { admin: u(), a: u(), b: u(), read: u(), ab: u() };
const bearer = (t: string) => ({ authorization: `Bearer ${t}` });
const taskQueue = `gateway-access-${randomUUID().slice(0, 8)}`;
const campaigns: string[] = [A, B];
let db: Pool;
let gw: GatewayUnderTest;
let app: FastifyInstance;
const gateways: GatewayUnderTest[] = [];

interface Problem {
  type: string;
  status: number;
  detail: string;
  errors?: { field: string; message: string }[];
  [extra: string]: unknown;
}

function problemOf(
  res: { statusCode: number; headers: Record<string, unknown>; body: string },
  status: number,
) {
  expect(res.statusCode, res.body).toBe(status);
  expect(String(res.headers['content-type'])).toMatch(/^application\/problem\+json/);
  return JSON.parse(res.body) as Problem;
}

const batchUrl = (c: string, step: number) => `/v1/campaigns/${c}/steps/${step}/rollouts`;
const batch = (batchId: string, extra: Record<string, unknown> = {}) => ({
  batchId,
  policyVersion: 'p1',
  groups: [{ taskId: 't1', rewards: [0.5, 1] }],
  ...extra,
});
const post = (a: FastifyInstance, url: string, token: string, payload: unknown) =>
  a.inject({ method: 'POST', url, headers: bearer(token), payload: payload as Record<string, unknown> });
const get = (a: FastifyInstance, url: string, token: string, headers: Record<string, string> = {}) =>
  a.inject({ method: 'GET', url, headers: { ...bearer(token), ...headers } });

async function seedPool(c: string, version: number, tasks: { id: string; pad?: number }[]): Promise<void> {
  for (const t of tasks)
    await db.query(
      `insert into pool_members (campaign_id, task_id, origin, category, task, task_hash, root_seed, added_step, added_version)
       values ($1, $2, 'seed', 'base', $3, 'h', $2, 0, $4) on conflict do nothing`,
      [c, t.id, JSON.stringify({ id: t.id, question: 'x'.repeat(t.pad ?? 0) }), version],
    );
  await db.query(
    `insert into pool_versions (campaign_id, version, step) values ($1, $2, 0)
     on conflict (campaign_id) do update set version = excluded.version`,
    [c, version],
  );
}

async function newCampaign(prefix: string): Promise<string> {
  const id = `${prefix}-${randomUUID().slice(0, 8)}`;
  await registerCampaign(db, { campaignId: id, config: ACCEPT_ANY_TASK });
  campaigns.push(id);
  return id;
}

async function rows(c: string): Promise<number> {
  const r = await db.query<{ n: number }>(
    'select count(*)::int as n from ingestion_batches where campaign_id = $1',
    [c],
  );
  return r.rows[0]!.n;
}

beforeAll(async () => {
  const dir = mkdtempSync(path.join(tmpdir(), 'rods-access-'));
  const file = path.join(dir, 'tokens');
  writeFileSync(
    file,
    [
      '# operator',
      `${T.admin} admin`,
      `${T.a} campaign:${A}   # trainer of A`,
      `${T.b} campaign:${B}`,
      `${T.read} read`,
      `${T.ab} campaign:${A},campaign:${B}`,
      '',
    ].join('\n'),
  );
  chmodSync(file, 0o600);
  const loaded = loadTokens({ file, env: {} });
  expect(loaded.warnings).toEqual([]);
  gw = await startGatewayUnderTest({
    application: 'rods-gateway-access-test',
    tokens: loaded.entries,
    taskQueue,
  });
  gateways.push(gw);
  ({ db, app } = gw);
  await registerCampaign(db, { campaignId: A, config: ACCEPT_ANY_TASK });
  await registerCampaign(db, { campaignId: B, config: ACCEPT_ANY_TASK });
  await seedPool(A, 1, [{ id: 'a1' }, { id: 'a2' }]);
  await seedPool(B, 1, [{ id: 'b1' }]);
});

afterAll(async () => {
  for (const g of gateways.slice(1)) await g.close([]);
  await gw?.close(campaigns);
});

describe('scoped tokens', () => {
  it('a campaign token may not post to or read another campaign: 403 naming the scope, nothing stored', async () => {
    const posted = problemOf(await post(app, batchUrl(A, 1), T.b, batch('x')), 403);
    expect(posted.type).toBe('urn:rods:problem:insufficient-scope');
    expect(posted.detail).toMatch(new RegExp(`^requires scope campaign:${A} or admin`));
    expect(posted.requiredScopes).toEqual([`campaign:${A}`, 'admin']);
    expect(await rows(A)).toBe(0);
    for (const url of [`/v1/campaigns/${A}/pool`, `/v1/campaigns/${A}/batch?n=2`, `/v1/campaigns/${A}`]) {
      const read = await get(app, url, T.b);
      expect(problemOf(read, 403).detail).toMatch(new RegExp(`^requires scope read, campaign:${A} or admin`));
      expect(String(read.headers['www-authenticate'])).toContain('error="insufficient_scope"');
    }
    // No oracle for which campaigns exist: an unknown one is a 403 too, not a 404.
    expect((await get(app, '/v1/campaigns/no-such-campaign/pool', T.b)).statusCode).toBe(403);
    expect((await get(app, '/v1/campaigns/no-such-campaign/pool', T.admin)).statusCode).toBe(404);
    // A path id that is no campaign id never reaches the WWW-Authenticate header (it was a 500).
    for (const id of ['x%00', 'x%0d%0aSet-Cookie:%20a=b', 'x%22,%20scope=%22admin']) {
      const odd = await get(app, `/v1/campaigns/${id}/pool`, T.b);
      expect(problemOf(odd, 403).type).toBe('urn:rods:problem:insufficient-scope');
      expect(odd.headers['www-authenticate']).toBe('Bearer realm="rods", error="insufficient_scope"');
      expect(odd.headers['set-cookie']).toBeUndefined();
    }
  });

  it('a campaign token posts to and reads its own campaign; one token may hold several campaigns', async () => {
    expect((await post(app, batchUrl(B, 1), T.b, batch('own'))).statusCode).toBe(202);
    expect((await get(app, `/v1/campaigns/${B}/pool`, T.b)).statusCode).toBe(200);
    expect((await get(app, `/v1/campaigns/${B}/batch?n=3&seed=s`, T.b)).statusCode).toBe(200);
    expect((await post(app, batchUrl(A, 1), T.ab, batch('ab'))).statusCode).toBe(202);
    expect((await get(app, `/v1/campaigns/${B}/pool`, T.ab)).statusCode).toBe(200);
  });

  it('a campaign token cannot create a campaign: 403 requires scope admin, nothing registered', async () => {
    const id = `acc-new-${randomUUID().slice(0, 8)}`;
    for (const t of [T.a, T.read]) {
      const res = await post(app, '/v1/campaigns', t, { campaignId: id, config: ACCEPT_ANY_TASK });
      expect(problemOf(res, 403).detail).toMatch(/^requires scope admin: POST \/v1\/campaigns/);
    }
    expect(await loadCampaign(db, id)).toBeFalsy();
    // The admin token passes the scope check (and meets validation: 422).
    expect((await post(app, '/v1/campaigns', T.admin, { campaignId: id })).statusCode).toBe(422);
  });

  it('a read token reads every campaign but posts nothing', async () => {
    for (const c of [A, B]) {
      expect((await get(app, `/v1/campaigns/${c}/pool`, T.read)).statusCode).toBe(200);
      expect((await get(app, `/v1/campaigns/${c}/batch?n=2`, T.read)).statusCode).toBe(200);
    }
    const status = await get(app, `/v1/campaigns/${A}?holds=false`, T.read);
    expect(status.statusCode, status.body).toBe(200);
    const before = await rows(B);
    const res = await post(app, batchUrl(B, 2), T.read, batch('r'));
    expect(problemOf(res, 403).detail).toMatch(new RegExp(`^requires scope campaign:${B} or admin`));
    expect(await rows(B)).toBe(before);
  });

  it('the admin token does everything; an unknown route is a 404 for every token (routing.int.test.ts)', async () => {
    expect((await post(app, batchUrl(B, 1), T.admin, batch('adm'))).statusCode).toBe(202);
    expect((await get(app, `/v1/campaigns/${A}/pool`, T.admin)).statusCode).toBe(200);
    for (const t of [T.admin, T.read, T.a])
      expect(problemOf(await get(app, '/v1/nothing-here', t), 404).type).toBe('urn:rods:problem:not-found');
  });

  it('every operation of the OpenAPI document names the scopes the gateway asks for', async () => {
    const doc = (await app.inject({ url: '/openapi.json' })).json() as {
      paths: Record<string, Record<string, { security?: unknown[]; 'x-required-scopes'?: string[] }>>;
    };
    let checked = 0;
    for (const [p, ops] of Object.entries(doc.paths))
      for (const [method, op] of Object.entries(ops)) {
        const url = p.replace('{id}', A).replace('{step}', '1');
        if (op.security?.length === 0) {
          expect((await app.inject({ method: method.toUpperCase() as 'GET', url })).statusCode).not.toBe(401);
          continue;
        }
        const res = await app.inject({
          method: method.toUpperCase() as 'GET' | 'POST',
          url,
          headers: bearer(T.b),
          ...(method === 'post' ? { payload: {} } : {}),
        });
        const expected = op['x-required-scopes']?.map((x) => x.replace('{id}', A));
        expect(expected, `${method} ${p}`).toBeDefined();
        expect(problemOf(res, 403).requiredScopes, `${method} ${p}`).toEqual(expected);
        checked++;
      }
    expect(checked).toBeGreaterThanOrEqual(5);
  });

  it('RODS_GATEWAY_TOKENS still gives admin tokens, with a warning', async () => {
    const legacy = u();
    const loaded = loadTokens({ env: { RODS_GATEWAY_TOKENS: `${legacy}, ${u()}` } });
    expect(loaded.warnings).toEqual([expect.stringMatching(/RODS_GATEWAY_TOKENS gives 2 admin token/)]);
    expect(loaded.warnings.join()).not.toContain(legacy);
    const g = await startGatewayUnderTest({
      application: 'rods-gateway-access-legacy',
      tokens: loaded.entries,
      taskQueue,
    });
    gateways.push(g);
    expect((await post(g.app, '/v1/campaigns', legacy, { campaignId: 'x' })).statusCode).toBe(422);
    expect((await get(g.app, `/v1/campaigns/${A}/pool`, legacy)).statusCode).toBe(200);
  });
});

describe('the same batch id with another body', () => {
  it('is a 409; the same body (any key order) stays a 200 duplicate; rows from before hashes match any body', async () => {
    const c = await newCampaign('acc-dup');
    expect((await post(app, batchUrl(c, 1), T.admin, batch('d1'))).statusCode).toBe(202);
    const changed = await post(app, batchUrl(c, 1), T.admin, batch('d1', { policyVersion: 'p2' }));
    const p = problemOf(changed, 409);
    expect(p.type).toBe('urn:rods:problem:batch-conflict');
    expect(p).toMatchObject({ batchId: 'd1', step: 1 });
    expect(
      problemOf(await post(app, batchUrl(c, 1), T.admin, batch('d1', { close: true })), 409).status,
    ).toBe(409);
    const same = await post(app, batchUrl(c, 1), T.admin, {
      groups: [{ rewards: [0.5, 1], taskId: 't1' }],
      policyVersion: 'p1',
      batchId: 'd1',
    });
    expect(same.statusCode).toBe(200);
    expect(same.json()).toMatchObject({ duplicate: true, groups: 1 });
    await db.query('update ingestion_batches set body_hash = null where campaign_id = $1', [c]);
    const legacy = await post(app, batchUrl(c, 1), T.admin, batch('d1', { policyVersion: 'p3' }));
    expect(legacy.statusCode).toBe(200);
    expect(await rows(c)).toBe(1);
  });
});

describe('limits', () => {
  let lim: GatewayUnderTest;
  const TL = { one: u(), two: u() };
  beforeAll(async () => {
    lim = await startGatewayUnderTest({
      application: 'rods-gateway-access-limits',
      tokens: [
        { token: TL.one, scopes: ['read'], label: 'one' },
        { token: TL.two, scopes: ['read'], label: 'two' },
      ],
      taskQueue,
      pollMs: 50,
      limits: {
        maxBatchN: 10,
        maxBatchBytes: 2048,
        maxLongPollsPerToken: 1,
        rateLimit: { max: 1000, windowMs: 60_000 },
      },
    });
    gateways.push(lim);
  });

  it('caps n: 422 above the cap naming the field and the cap', async () => {
    const res = await get(lim.app, `/v1/campaigns/${A}/batch?n=11`, TL.one);
    const p = problemOf(res, 422);
    expect(p.errors).toEqual([{ field: 'n', message: expect.stringContaining('[1, 10]') }]);
    expect(p.maxN).toBe(10);
    expect((await get(lim.app, `/v1/campaigns/${A}/batch?n=10`, TL.one)).statusCode).toBe(200);
  });

  it('caps the bytes of a /batch answer: the first draws that fit, marked truncated', async () => {
    const c = await newCampaign('acc-bytes');
    await seedPool(
      c,
      1,
      Array.from({ length: 5 }, (_, i) => ({ id: `big${i}`, pad: 300 })),
    );
    const full = (await get(app, `/v1/campaigns/${c}/batch?n=10&seed=s`, T.admin)).json() as {
      n: number;
      truncated: boolean;
      tasks: { taskId: string }[];
    };
    expect([full.n, full.truncated, full.tasks.length]).toEqual([10, false, 10]);
    const res = await get(lim.app, `/v1/campaigns/${c}/batch?n=10&seed=s`, TL.one);
    expect(res.statusCode).toBe(200);
    expect(Buffer.byteLength(res.body)).toBeLessThanOrEqual(2048);
    const cut = res.json() as typeof full & { requested: number; maxBytes: number };
    expect(cut.truncated).toBe(true);
    expect(cut.requested).toBe(10);
    expect(cut.maxBytes).toBe(2048);
    expect(cut.n).toBe(cut.tasks.length);
    expect(cut.n).toBeGreaterThan(0);
    expect(cut.n).toBeLessThan(10);
    // A prefix of the same seeded sample: the trainer's next request continues it.
    expect(cut.tasks.map((t) => t.taskId)).toEqual(full.tasks.slice(0, cut.n).map((t) => t.taskId));
  });

  it('caps concurrent long-polls per token: 429 with Retry-After, other tokens unaffected', async () => {
    const c = await newCampaign('acc-poll');
    await seedPool(c, 1, [{ id: 'p1' }]);
    // inject() sends on then(): started now, held until the pool moves.
    const held = get(lim.app, `/v1/campaigns/${c}/pool?wait=60`, TL.one, { 'if-none-match': '"1"' }).then(
      (r) => r,
    );
    let refused: { statusCode: number; headers: Record<string, unknown>; body: string } | undefined;
    await waitUntil(
      async () => {
        const probe = await get(lim.app, `/v1/campaigns/${c}/pool?wait=1`, TL.one, {
          'if-none-match': '"1"',
        });
        if (probe.statusCode === 429) refused = probe;
        return refused !== undefined;
      },
      { what: 'a second long-poll of the same token to be refused' },
    );
    const p = problemOf(refused!, 429);
    expect(p.type).toBe('urn:rods:problem:too-many-long-polls');
    expect(refused!.headers['retry-after']).toBe('1');
    // Another token, or the same token without wait, is served.
    expect(
      (await get(lim.app, `/v1/campaigns/${c}/pool?wait=1`, TL.two, { 'if-none-match': '"1"' })).statusCode,
    ).toBe(304);
    expect(
      (await get(lim.app, `/v1/campaigns/${c}/pool`, TL.one, { 'if-none-match': '"1"' })).statusCode,
    ).toBe(304);
    await seedPool(c, 2, [{ id: 'p2' }]);
    expect((await held).statusCode).toBe(200);
    // The slot is free again once the held poll answered.
    expect(
      (await get(lim.app, `/v1/campaigns/${c}/pool?wait=1`, TL.one, { 'if-none-match': '"1"' })).statusCode,
    ).toBe(200);
  });

  it('rate-limits each token: 429 with Retry-After and a problem under a burst, other tokens served', async () => {
    const burst = await startGatewayUnderTest({
      application: 'rods-gateway-access-burst',
      tokens: [
        { token: TL.one, scopes: ['read'], label: 'one' },
        { token: TL.two, scopes: ['read'], label: 'two' },
      ],
      taskQueue,
      limits: { rateLimit: { max: 5, windowMs: 60_000 } },
    });
    gateways.push(burst);
    const url = `/v1/campaigns/${A}/pool`;
    // One after the other: requests racing in one tick all read the store's last count (the
    // plugin's local store hands out its live counter), which refuses more of them, never fewer.
    const answers = [];
    for (let i = 0; i < 8; i++) answers.push(await get(burst.app, url, TL.one));
    expect(answers.map((r) => r.statusCode)).toEqual([200, 200, 200, 200, 200, 429, 429, 429]);
    const limited = answers.find((r) => r.statusCode === 429)!;
    const p = problemOf(limited, 429);
    expect(p.type).toBe('urn:rods:problem:rate-limited');
    expect(p.detail).toMatch(/more than 5 requests in 60 s/);
    expect(Number(limited.headers['retry-after'])).toBeGreaterThan(0);
    expect(Number(limited.headers['retry-after'])).toBeLessThanOrEqual(60);
    // Keyed by token, not by address: the other token (same address) is served.
    expect((await get(burst.app, url, TL.two)).statusCode).toBe(200);
    // Requests without a valid token are limited by address, and still refused as such.
    const bad = [];
    for (let i = 0; i < 6; i++) bad.push((await get(burst.app, url, 'wrong')).statusCode);
    expect(bad).toEqual([403, 403, 403, 403, 403, 429]);
    // Open endpoints are never limited.
    const health = await Promise.all(Array.from({ length: 8 }, () => burst.app.inject({ url: '/healthz' })));
    expect(health.every((r) => r.statusCode === 200)).toBe(true);
  });
});
