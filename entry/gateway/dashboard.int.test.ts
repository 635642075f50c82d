// The dashboard's routes against the real PostgreSQL (through fastify's inject): the page is
// served to anyone with its security headers, every data route needs a token that may read the
// campaign, the campaign list shows a token only its campaigns, polls get 304 with the ETag, and
// the figures come from the projections and the event store.
import { randomUUID } from 'node:crypto';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import type { Client } from '@temporalio/client';
import type { FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { registerCampaign } from '../../platform/store/campaigns.js';
import { createPool, type Pool } from '../../platform/store/db.js';
import { temporalClient } from '../../platform/temporal/connect.js';
import { TokenSet } from './auth.js';
import { buildGateway } from './server.js';

const A = `dash-a-${randomUUID().slice(0, 8)}`;
const B = `dash-b-${randomUUID().slice(0, 8)}`;
const ADMIN = `adm-${randomUUID()}`;
const READ = `rd-${randomUUID()}`;
const ONLY_A = `a-${randomUUID()}`;

let db: Pool;
let client: Client;
let closeClient: () => Promise<void>;
let app: FastifyInstance;
let unbuilt: FastifyInstance;
let dir: string;

const get = (url: string, token?: string, headers: Record<string, string> = {}) =>
  app.inject({
    method: 'GET',
    url,
    headers: { ...(token ? { authorization: `Bearer ${token}` } : {}), ...headers },
  });

beforeAll(async () => {
  db = createPool({ application: 'rods-dashboard-test', max: 4 });
  ({ client, close: closeClient } = await temporalClient());
  dir = mkdtempSync(path.join(tmpdir(), 'rods-dashboard-'));
  mkdirSync(path.join(dir, 'assets'));
  writeFileSync(path.join(dir, 'index.html'), '<!doctype html><title>rods</title>');
  writeFileSync(path.join(dir, 'assets', 'index-abc123.js'), 'console.log(1)');
  writeFileSync(path.join(dir, 'secret.txt'), 'not served');
  const tokens = new TokenSet([
    { token: ADMIN, scopes: ['admin'], label: 'admin' },
    { token: READ, scopes: ['read'], label: 'read' },
    { token: ONLY_A, scopes: [`campaign:${A}`], label: 'only-a' },
  ]);
  const common = { db, temporal: client, tokens, taskQueue: `rods-test-${A}` };
  app = buildGateway({ ...common, dashboard: { dir, temporalUiUrl: 'http://127.0.0.1:8233' } });
  unbuilt = buildGateway({ ...common, dashboard: { dir: path.join(dir, 'missing') } });
  await Promise.all([app.ready(), unbuilt.ready()]);
  await registerCampaign(db, { campaignId: A, config: {} });
  await registerCampaign(db, { campaignId: B, config: {} });
  // A closed step with its band summary, a plan, and a pool of one seed and one child.
  await db.query(
    `insert into steps (campaign_id, step, declared_groups, closed_at, summary) values ($1, 1, 2, now(), $2)`,
    [
      A,
      {
        hard: { tasks: 1, meanVariance: 0.01 },
        boundary: { tasks: 3, meanVariance: 0.06 },
        mastered: { tasks: 0, meanVariance: null },
        boundaryVarianceRatio: 6,
      },
    ],
  );
  await db.query(`insert into campaign_plans (campaign_id, step, state, result) values ($1, 1, '{}', $2)`, [
    A,
    { step: 1, poolVersion: 2, activeSize: 5, generated: 1 },
  ]);
  for (const [task, origin, depth] of [
    ['s1', 'seed', 0],
    ['s1~c1', 'generated', 1],
  ] as const)
    await db.query(
      `insert into pool_members (campaign_id, task_id, origin, category, task, task_hash, parents, root_seed, depth, added_step, added_version)
       values ($1, $2, $3, 'base', '{}', 'h', $4, 's1', $5, 0, 1)`,
      [A, task, origin, depth === 0 ? [] : ['s1'], depth],
    );
});

afterAll(async () => {
  await app?.close();
  await unbuilt?.close();
  for (const t of ['steps', 'campaign_plans', 'pool_members'])
    await db?.query(`delete from ${t} where campaign_id = any($1)`, [[A, B]]);
  await closeClient?.();
  await db?.end();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

describe('the dashboard routes', () => {
  it('serves the page to anyone, with a policy that allows its own scripts only', async () => {
    const page = await get('/dashboard/');
    expect(page.statusCode).toBe(200);
    expect(page.body).toContain('<title>rods</title>');
    expect(page.headers['content-security-policy']).toContain("default-src 'self'");
    expect(page.headers['content-security-policy']).not.toContain('unsafe-eval');
    expect(page.headers['cache-control']).toBe('no-cache');
    const asset = await get('/dashboard/assets/index-abc123.js');
    expect(asset.statusCode).toBe(200);
    expect(asset.headers['cache-control']).toContain('immutable');
    expect((await get('/dashboard')).headers.location).toBe('/dashboard/');
    // Only the page and its assets: nothing else in the folder, no way out of it.
    expect((await get('/dashboard/secret.txt')).statusCode).toBe(404);
    expect((await get('/dashboard/assets/..%2Fsecret.txt')).statusCode).toBe(404);
    // Outside /dashboard/ (the URL is normalised): a path no route matches, a 404 for anyone.
    expect((await get('/dashboard/../package.json')).statusCode).toBe(404);
  });

  it('says how to build the page when it is not built', async () => {
    const r = await unbuilt.inject({ method: 'GET', url: '/dashboard/' });
    expect(r.statusCode).toBe(503);
    expect(r.json().detail).toContain('npm run build:dashboard');
  });

  it('needs a token for every data route and a scope over the campaign', async () => {
    expect((await get('/v1/dashboard/campaigns')).statusCode).toBe(401);
    expect((await get(`/v1/campaigns/${A}/dashboard/series`)).statusCode).toBe(401);
    expect((await get(`/v1/campaigns/${A}/dashboard/series`, 'nope')).statusCode).toBe(403);
    expect((await get(`/v1/campaigns/${B}/dashboard/series`, ONLY_A)).statusCode).toBe(403);
    expect((await get(`/v1/campaigns/${B}/dashboard/lineage/s1`, ONLY_A)).statusCode).toBe(403);
    expect((await get(`/v1/campaigns/${A}/dashboard/series`, ONLY_A)).statusCode).toBe(200);
    expect((await get(`/v1/campaigns/${B}/dashboard/series`, READ)).statusCode).toBe(200);
    expect((await get(`/v1/campaigns/nope-${A}/dashboard/series`, READ)).statusCode).toBe(404);
  });

  it('lists only the campaigns a token may read, with the Temporal UI', async () => {
    const mine = (await get('/v1/dashboard/campaigns', ONLY_A)).json();
    expect(mine.campaigns.map((c: { campaignId: string }) => c.campaignId)).toEqual([A]);
    expect(mine.temporalUi).toBe('http://127.0.0.1:8233');
    const all = (await get('/v1/dashboard/campaigns', READ)).json();
    const ids = all.campaigns.map((c: { campaignId: string }) => c.campaignId);
    expect(ids).toContain(A);
    expect(ids).toContain(B);
  });

  it('answers a poll whose data did not change with 304, and a changed one with the new body', async () => {
    const url = `/v1/campaigns/${A}/dashboard/series`;
    const first = await get(url, ADMIN);
    const etag = first.headers.etag as string;
    expect(etag).toMatch(/^"[\w-]+"$/);
    const again = await get(url, ADMIN, { 'if-none-match': etag });
    expect(again.statusCode).toBe(304);
    expect(again.body).toBe('');
    await db.query(
      `update pool_members set active = false, removed_rule = 'mastered' where campaign_id = $1 and task_id = 's1~c1'`,
      [A],
    );
    const changed = await get(url, ADMIN, { 'if-none-match': etag });
    expect(changed.statusCode).toBe(200);
    expect(changed.headers.etag).not.toBe(etag);
    expect(changed.json().funnel.retired).toBe(1);
  });

  it('draws the figures of the projections', async () => {
    await db.query(`update pool_members set active = true, removed_rule = null where campaign_id = $1`, [A]);
    const s = (await get(`/v1/campaigns/${A}/dashboard/series`, ADMIN)).json();
    expect(s.steps).toEqual([
      expect.objectContaining({
        step: 1,
        hard: 1,
        boundary: 3,
        mastered: 0,
        varBoundary: 0.06,
        varMastered: null,
        boundaryVarianceRatio: 6,
      }),
    ]);
    expect(s.pool).toEqual([{ step: 1, version: 2, active: 5, seeds: 4, generated: 1 }]);
    expect(s.composition).toEqual([
      { origin: 'seed', depth: 0, active: 1, retired: 0, pruned: 0 },
      { origin: 'generated', depth: 1, active: 1, retired: 0, pruned: 0 },
    ]);
    expect(s.funnel).toMatchObject({ selected: 0, validated: 0, injected: 0, retired: 0, pruned: 0 });
    const tasks = (await get(`/v1/campaigns/${A}/dashboard/tasks?q=~c`, ADMIN)).json();
    expect(tasks.tasks.map((t: { taskId: string }) => t.taskId)).toEqual(['s1~c1']);
    // A % in the search is a character, not a wildcard.
    expect((await get(`/v1/campaigns/${A}/dashboard/tasks?q=%25`, ADMIN)).json().tasks).toEqual([]);
  });

  it('answers what holds the campaign, with the findings and the workflow link', async () => {
    const r = await get(`/v1/campaigns/${A}/dashboard/status`, ADMIN);
    expect(r.statusCode).toBe(200);
    const st = r.json();
    expect(st.campaignId).toBe(A);
    expect(st.workflow).toBeUndefined();
    expect(st.findings.map((f: { code: string }) => f.code)).toContain('no-workflow');
    expect(st.temporalUi).toBe(`http://127.0.0.1:8233/namespaces/default/workflows/campaign-${A}`);
  });

  it('says which task a campaign has no record of', async () => {
    const r = await get(`/v1/campaigns/${A}/dashboard/lineage/nothing-here`, ADMIN);
    expect(r.statusCode).toBe(404);
    expect(r.json().detail).toContain('no record of task');
  });

  it('tells only a token that reads every campaign that another campaign has the task', async () => {
    // A task of B only; a token of A alone must not tell it from a task nobody has.
    const inB = `b-only-${randomUUID().slice(0, 8)}`;
    const nowhere = `no-one-${randomUUID().slice(0, 8)}`;
    await db.query(
      `insert into pool_members (campaign_id, task_id, origin, category, task, task_hash, root_seed, added_step, added_version)
       values ($1, $2, 'seed', 'base', '{}', 'h', $2, 0, 1)`,
      [B, inB],
    );
    const lineage = (task: string, token: string) =>
      get(`/v1/campaigns/${A}/dashboard/lineage/${task}`, token);
    const mine = await lineage(inB, ONLY_A);
    const none = await lineage(nowhere, ONLY_A);
    expect([mine.statusCode, none.statusCode]).toEqual([404, 404]);
    expect(mine.json().detail).not.toMatch(/another campaign/);
    expect(mine.body.replace(inB, nowhere)).toBe(none.body);
    for (const token of [ADMIN, READ]) {
      expect((await lineage(inB, token)).json().detail).toContain('(another campaign has)');
      expect((await lineage(nowhere, token)).json().detail).not.toMatch(/another campaign/);
    }
  });
});
