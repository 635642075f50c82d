// What the gateway refuses because the campaign never asked for it: a new step behind the last
// closed one (409) or beyond the campaign's forward window (422), groups larger than the
// campaign's rewards.maxRollouts (422), and strings PostgreSQL cannot store (422, never a 500 a
// client retries for ever). Whatever was accepted stays accepted: duplicates and open steps are
// answered as before. No worker runs on this file's task queue; its workflows are terminated.
import { randomUUID } from 'node:crypto';
import type { FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { checkGroup } from '../../domain/reward-group.js';
import { loadCampaign, registerCampaign } from '../../platform/store/campaigns.js';
import type { Pool } from '../../platform/store/db.js';
import {
  type GatewayUnderTest,
  startGatewayUnderTest,
} from '../../test/support/gateway/gateway-under-test.js';

const TOKEN = `tok-${randomUUID()}`;
const AUTH = { authorization: `Bearer ${TOKEN}` };
const taskQueue = `gateway-limits-${randomUUID().slice(0, 8)}`;
let db: Pool;
let gateway: GatewayUnderTest;
let app: FastifyInstance;
const campaigns: string[] = [];

async function newCampaign(config: Record<string, unknown> = {}): Promise<string> {
  const id = `gwl-${randomUUID().slice(0, 8)}`;
  // These tests report rewards for tasks of their own: the campaign counts any task id.
  const ingestion = { unknownTasks: 'accept', ...(config.ingestion as Record<string, unknown> | undefined) };
  await registerCampaign(db, { campaignId: id, config: { ...config, ingestion } });
  campaigns.push(id);
  return id;
}

interface Problem {
  type: string;
  status: number;
  detail: string;
  errors?: { field: string; message: string }[];
  [extra: string]: unknown;
}

const batchUrl = (c: string, step: number) => `/v1/campaigns/${c}/steps/${step}/rollouts`;
const post = (url: string, payload: unknown) =>
  app.inject({ method: 'POST', url, payload: payload as Record<string, unknown>, headers: AUTH });
const batch = (batchId: string, extra: Record<string, unknown> = {}) => ({
  batchId,
  policyVersion: 'ckpt-1',
  groups: [{ taskId: 't1', rewards: [0.5, 1] }],
  ...extra,
});
const send = async (c: string, step: number, body: unknown) =>
  (await post(batchUrl(c, step), body)).statusCode;

async function refused(c: string, step: number, body: unknown, status: number): Promise<Problem> {
  const res = await post(batchUrl(c, step), body);
  expect(res.statusCode, res.body).toBe(status);
  expect(String(res.headers['content-type'])).toMatch(/^application\/problem\+json/);
  return res.json() as Problem;
}

async function batchRows(campaignId: string): Promise<string[]> {
  const { rows } = await db.query<{ id: string }>(
    "select step || '/' || batch_id as id from ingestion_batches where campaign_id = $1",
    [campaignId],
  );
  return rows.map((r) => r.id).sort();
}

beforeAll(async () => {
  gateway = await startGatewayUnderTest({
    application: 'rods-gateway-limits-test',
    tokens: [TOKEN],
    taskQueue,
  });
  ({ db, app } = gateway);
});

afterAll(async () => {
  await gateway?.close(campaigns);
});

describe('the step of a batch against the campaign', () => {
  it('409 for a new step behind the last closed one, by a batch here or by the aggregator', async () => {
    const c = await newCampaign();
    expect(await send(c, 5, batch('close-5', { close: true }))).toBe(202);
    const behind = await refused(c, 3, batch('late'), 409);
    expect(behind.type).toBe('urn:rods:problem:step-behind');
    expect(behind).toMatchObject({ step: 3, lastClosedStep: 5 });
    expect(behind.detail).toMatch(/step 3 .* behind its last closed step 5/);
    // A step the aggregator closed counts too (a trainer that wrote StepClosed to Kafka itself).
    await db.query(
      'insert into steps (campaign_id, step, declared_groups, closed_at) values ($1, 8, 1, now())',
      [c],
    );
    expect(await refused(c, 6, batch('late'), 409)).toMatchObject({ step: 6, lastClosedStep: 8 });
    expect(await batchRows(c)).toEqual(['5/close-5']);
  });

  it('422 for a step beyond ingestion.maxStepsAhead past the last closed one (0 before any)', async () => {
    const c = await newCampaign();
    const ahead = await refused(c, 17, batch('far'), 422);
    expect(ahead.type).toBe('urn:rods:problem:step-out-of-window');
    expect(ahead.errors).toEqual([expect.objectContaining({ field: 'step' })]);
    expect(ahead).toMatchObject({ step: 17, lastClosedStep: null, maxStepsAhead: 16, maxStep: 16 });
    expect(ahead.detail).toContain('ingestion.maxStepsAhead = 16');
    expect((await refused(c, 10 ** 15 - 1, batch('farther'), 422)).maxStep).toBe(16);
    expect(await send(c, 16, batch('edge'))).toBe(202);

    // A smaller window from the campaign's config; the trainer's own closes move it, so a lagging
    // aggregator never holds the trainer back.
    const d = await newCampaign({ ingestion: { maxStepsAhead: 2 } });
    expect(await send(d, 1, batch('s1', { close: true }))).toBe(202);
    expect(await refused(d, 4, batch('s4'), 422)).toMatchObject({
      step: 4,
      lastClosedStep: 1,
      maxStepsAhead: 2,
      maxStep: 3,
    });
    expect(await send(d, 2, batch('s2', { close: true }))).toBe(202);
    expect(await send(d, 4, batch('s4'))).toBe(202);
    expect(await batchRows(d)).toEqual(['1/s1', '2/s2', '4/s4']);
  });

  it('keeps accepting what was accepted: duplicates and batches of steps still open', async () => {
    const c = await newCampaign({ ingestion: { maxStepsAhead: 2 } });
    expect(await send(c, 1, batch('a'))).toBe(202);
    // The trainer closes a later step before step 1: step 1 must still be able to close.
    expect(await send(c, 2, batch('b', { close: true }))).toBe(202);
    expect(await send(c, 3, batch('c', { close: true }))).toBe(202);
    const dup = await post(batchUrl(c, 1), batch('a'));
    expect(dup.statusCode).toBe(200);
    expect(dup.json()).toMatchObject({ workflowId: `ingest:${c}:1:a`, duplicate: true });
    expect(await send(c, 1, batch('a2', { groups: [{ taskId: 't2', rewards: [0] }] }))).toBe(202);
    expect(await send(c, 1, batch('a-close', { groups: [], close: true }))).toBe(202);
    // A step the aggregator already counts groups for is open as well.
    await db.query('insert into steps (campaign_id, step) values ($1, 0)', [c]);
    expect(await send(c, 0, batch('z', { close: true }))).toBe(202);
    // Once closed, a resend is still a duplicate, not a conflict.
    expect(await send(c, 1, batch('a-close', { groups: [], close: true }))).toBe(200);
    expect(await send(c, 2, batch('b', { close: true }))).toBe(200);
    expect(await batchRows(c)).toEqual(['0/z', '1/a', '1/a-close', '1/a2', '2/b', '3/c']);
  });
});

describe('reward counts against the campaign', () => {
  const rewards = (n: number) => Array.from({ length: n }, (_, i) => (i % 3) / 2);

  it('422 naming rewards.maxRollouts for a group the aggregator would dead-letter', async () => {
    const c = await newCampaign();
    const limit = (await loadCampaign(db, c))!.config.rewards;
    expect(limit.maxRollouts).toBe(1024);
    const groups = [
      { taskId: 'ok', rewards: rewards(1024) },
      { taskId: 'big', rewards: rewards(1025) },
    ];
    // The aggregator's own rule refuses the second group.
    expect(checkGroup(groups[1]!.rewards, 1, undefined, limit)?.code).toBe('too-many-rollouts');
    const p = await refused(c, 1, batch('big', { groups }), 422);
    expect(p.errors).toEqual([
      { field: 'groups[1].rewards', message: expect.stringContaining('exceed the limit of 1024') },
    ]);
    expect(p.maxRollouts).toBe(1024);
    expect(p.detail).toContain('rewards.maxRollouts = 1024');
    expect(await send(c, 1, batch('fits', { groups: [groups[0]] }))).toBe(202);

    const small = await newCampaign({ rolloutsPerTask: 8, rewards: { maxRollouts: 8 } });
    const q = await refused(small, 1, batch('nine', { groups: [{ taskId: 't', rewards: rewards(9) }] }), 422);
    expect(q).toMatchObject({ maxRollouts: 8 });
    expect(q.errors![0]!.message).toContain('exceed the limit of 8');
    expect(await send(small, 1, batch('eight', { groups: [{ taskId: 't', rewards: rewards(8) }] }))).toBe(
      202,
    );
    expect(await batchRows(c)).toEqual(['1/fits']);
    expect(await batchRows(small)).toEqual(['1/eight']);
  });
});

describe('strings PostgreSQL cannot store', () => {
  it('422 naming the field of the batch, never a 500', async () => {
    const c = await newCampaign();
    for (const [body, field] of [
      [batch('nul', { groups: [{ taskId: 't\u0000', rewards: [1] }] }), 'groups[0].taskId'],
      [
        batch('sur', {
          groups: [
            { taskId: 'ok', rewards: [1] },
            { taskId: '\ud800x', rewards: [1] },
          ],
        }),
        'groups[1].taskId',
      ],
      [batch('pv-nul', { policyVersion: 'ckpt\u0000' }), 'policyVersion'],
      [batch('pv-sur', { policyVersion: 'ckpt-\udc00' }), 'policyVersion'],
      [batch('pv-nl', { policyVersion: 'ckpt\n1' }), 'policyVersion'],
    ] as const) {
      const p = await refused(c, 1, body, 422);
      expect(p.errors).toEqual([
        { field, message: expect.stringMatching(/control character|lone surrogate/) },
      ]);
    }
    expect(await batchRows(c)).toEqual([]);
    expect(await send(c, 1, batch('fine', { groups: [{ taskId: 'tâche-😀', rewards: [1] }] }))).toBe(202);
  });

  it('422 for a campaign whose name or config holds one, and nothing is registered', async () => {
    for (const [body, field] of [
      [{ name: 'demo\u0000' }, 'name'],
      [{ config: { generator: { model: 'm\u0000' } } }, 'config.generator.model'],
      [{ config: { seeds: { categories: ['\ud83d'] } } }, 'config.seeds.categories[0]'],
    ] as const) {
      const id = `gwl-${randomUUID().slice(0, 8)}`;
      const res = await post('/v1/campaigns', { campaignId: id, config: {}, ...body });
      expect(res.statusCode, res.body).toBe(422);
      expect((res.json() as Problem).errors).toEqual([expect.objectContaining({ field })]);
      expect(await loadCampaign(db, id)).toBeUndefined();
    }
  });
});
