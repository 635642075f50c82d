// The dashboard's routes against the real PostgreSQL (through fastify's inject): the page is
// served to anyone with its security headers, every data route needs a token that may read the
// campaign, the campaign list shows a token only its campaigns, polls get 304 with the ETag, and
// the figures come from the projections and the event store; the evaluations of checkpoints come
// from their recorded events, by trainer step, with accuracy and 95 % intervals.
import { randomUUID } from 'node:crypto';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import type { Client } from '@temporalio/client';
import type { FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { dashboardEvaluations } from '../../analysis/status/evaluations.js';
import { accuracyByCategory, evaluationIdOf, wilson } from '../../domain/evaluation.js';
import { eventIds, streams } from '../../domain/ids.js';
import { registerCampaign } from '../../platform/store/campaigns.js';
import { createPool, type Pool } from '../../platform/store/db.js';
import { append, type NewEvent, typedEvent } from '../../platform/store/events/event-store.js';
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

/**
 * Records an evaluation of `campaignId` as its events: started at `at` (ms), a verdict per task
 * ([taskId, category, valid]; the task list also holds `unscored` tasks), then completed, failed or
 * left running.
 */
async function recordEvaluation(
  campaignId: string,
  checkpoint: { id: string; step: number } | null,
  verdicts: [string, string, boolean][],
  opts: { end?: 'completed' | 'failed' | 'running'; at?: number; model?: string; unscored?: number } = {},
): Promise<string> {
  const { end = 'completed', at = Date.now(), model = 'policy', unscored = 0 } = opts;
  const evaluationId = evaluationIdOf(campaignId, checkpoint?.id ?? null, model, 'dashboard-test');
  const base = { evaluationId, campaignId };
  const tasks = [
    ...verdicts.map(([taskId, category]) => ({ taskId, category })),
    ...Array.from({ length: unscored }, (_, i) => ({ taskId: `unscored_${i}`, category: 'base' })),
  ];
  const events: NewEvent[] = [
    typedEvent('EvaluationStarted', {
      ...base,
      eventId: eventIds.evaluationStarted(evaluationId),
      checkpointId: checkpoint?.id ?? null,
      trainerStep: checkpoint?.step ?? null,
      manifestRoot: checkpoint ? 'ab'.repeat(32) : null,
      endpoint: 'http://10.0.0.7:8000/v1',
      model,
      bfclEvalVersion: '2025.1',
      tasks,
      occurredAt: at,
    }),
    ...verdicts.map(([taskId, category, valid], i) =>
      typedEvent('EvaluationTaskScored', {
        ...base,
        eventId: eventIds.evaluationTaskScored(evaluationId, taskId),
        taskId,
        category,
        valid,
        errorType: valid ? null : 'state_mismatch',
        error: null,
        turns: 2,
        toolCalls: 3,
        promptTokens: null,
        completionTokens: null,
        durationMs: 1000,
        occurredAt: at + i + 1,
      }),
    ),
  ];
  const acc = accuracyByCategory(
    tasks,
    verdicts.map(([taskId, category, valid]) => ({ taskId, category, valid })),
  );
  if (end === 'completed')
    events.push(
      typedEvent('EvaluationCompleted', {
        ...base,
        eventId: eventIds.evaluationCompleted(evaluationId),
        ...acc,
        occurredAt: at + 100,
      }),
    );
  if (end === 'failed')
    events.push(
      typedEvent('EvaluationFailed', {
        ...base,
        eventId: eventIds.evaluationFailed(evaluationId),
        reason: 'the endpoint is not reachable',
        scored: verdicts.length,
        occurredAt: at + 100,
      }),
    );
  await append(db, streams.evaluation(evaluationId), 'no-stream', events);
  return evaluationId;
}

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

  it("lists the campaign's evaluations by trainer step, with accuracy per category and 95 % intervals", async () => {
    const url = `/v1/campaigns/${A}/dashboard/evaluations`;
    const none = (await get(url, ONLY_A)).json();
    expect(none).toEqual({ campaignId: A, limit: 200, truncated: false, evaluations: [] });
    const t0 = Date.now();
    // Recorded out of step order: the answer sorts them, the base model (no checkpoint) first.
    const late = await recordEvaluation(
      A,
      { id: 'run-step-20', step: 20 },
      [
        ['multi_turn_base_1', 'base', true],
        ['multi_turn_base_2', 'base', true],
        ['multi_turn_base_3', 'base', true],
        ['multi_turn_base_4', 'base', false],
        ['multi_turn_miss_func_1', 'miss_func', true],
        ['multi_turn_miss_func_2', 'miss_func', false],
      ],
      { at: t0 },
    );
    const early = await recordEvaluation(
      A,
      { id: 'run-step-5', step: 5 },
      [
        ['multi_turn_base_1', 'base', false],
        ['multi_turn_base_2', 'base', true],
      ],
      { at: t0 + 1 },
    );
    const failed = await recordEvaluation(
      A,
      { id: 'run-step-10', step: 10 },
      [['multi_turn_base_1', 'base', true]],
      {
        end: 'failed',
        at: t0 + 2,
        unscored: 3,
      },
    );
    const base = await recordEvaluation(A, null, [], { end: 'running', at: t0 + 3, unscored: 2 });
    const inB = await recordEvaluation(
      B,
      { id: 'run-step-5', step: 5 },
      [['multi_turn_base_1', 'base', true]],
      {
        at: t0 + 4,
      },
    );

    const r = await get(url, ONLY_A);
    expect(r.statusCode).toBe(200);
    const body = r.json();
    expect(body).toMatchObject({ campaignId: A, limit: 200, truncated: false });
    const evals = body.evaluations as { evaluationId: string; trainerStep: number | null }[];
    expect(evals.map((e) => [e.evaluationId, e.trainerStep])).toEqual([
      [base, null],
      [early, 5],
      [failed, 10],
      [late, 20],
    ]);
    const [b, e, f, l] = body.evaluations;
    expect(l).toEqual({
      evaluationId: late,
      checkpointId: 'run-step-20',
      trainerStep: 20,
      model: 'policy',
      bfclEvalVersion: '2025.1',
      status: 'completed',
      reason: null,
      tasks: 6,
      scored: 6,
      startedAt: t0,
      endedAt: t0 + 100,
      categories: [
        { category: 'base', correct: 3, total: 4, accuracy: 0.75, interval95: wilson(3, 4) },
        { category: 'miss_func', correct: 1, total: 2, accuracy: 0.5, interval95: wilson(1, 2) },
      ],
      overall: { category: 'overall', correct: 4, total: 6, accuracy: 4 / 6, interval95: wilson(4, 6) },
    });
    // The endpoint may name an internal host: it stays out.
    expect(r.body).not.toContain('10.0.0.7');
    expect(e.overall).toMatchObject({ correct: 1, total: 2, accuracy: 0.5 });
    expect(f).toMatchObject({
      status: 'failed',
      reason: 'the endpoint is not reachable',
      tasks: 4,
      scored: 1,
      overall: { correct: 1, total: 1, accuracy: 1, interval95: wilson(1, 1) },
    });
    // Nothing scored yet: no accuracy, the interval is all of [0, 1].
    expect(b).toMatchObject({
      checkpointId: null,
      status: 'running',
      tasks: 2,
      scored: 0,
      categories: [],
      overall: { correct: 0, total: 0, accuracy: null, interval95: [0, 1] },
    });

    // Another campaign's evaluations are its own.
    expect(r.body).not.toContain(inB);
    const inOther = (await get(`/v1/campaigns/${B}/dashboard/evaluations`, READ)).json();
    expect(inOther.evaluations.map((x: { evaluationId: string }) => x.evaluationId)).toEqual([inB]);

    // A poll whose evaluations did not change costs a 304.
    const again = await get(url, ONLY_A, { 'if-none-match': r.headers.etag as string });
    expect(again.statusCode).toBe(304);
  });

  it('bounds the evaluations it answers with to the newest, and says so', async () => {
    const some = await dashboardEvaluations(db, A, 2);
    expect(some.truncated).toBe(true);
    expect(some.limit).toBe(2);
    // The newest two by start (the base model's run and the failed one), still by trainer step.
    expect(some.evaluations.map((e) => e.trainerStep)).toEqual([null, 10]);
    expect((await dashboardEvaluations(db, A, 4)).truncated).toBe(false);
  });

  it('refuses the evaluations to a request without a token or without a scope over the campaign', async () => {
    expect((await get(`/v1/campaigns/${A}/dashboard/evaluations`)).statusCode).toBe(401);
    expect((await get(`/v1/campaigns/${A}/dashboard/evaluations`, 'nope')).statusCode).toBe(403);
    expect((await get(`/v1/campaigns/${B}/dashboard/evaluations`, ONLY_A)).statusCode).toBe(403);
    expect((await get(`/v1/campaigns/nope-${A}/dashboard/evaluations`, READ)).statusCode).toBe(404);
  });
});
