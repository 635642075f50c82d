// The gateway over real HTTP with an in-process rods worker: a campaign created and queried
// through the API, and rollout batches that land on Kafka exactly once even when POSTed twice,
// published by the gateway itself or, when its send fails, by their ingestion workflow (a
// per-test rewards topic keeps rods.rewards.v1 clean).
import { randomUUID } from 'node:crypto';
import type { Client } from '@temporalio/client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { decode } from '../../platform/codec/registry.js';
import { readUntil, withAdmin } from '../../platform/kafka/client.js';
import { registerCampaign } from '../../platform/store/campaigns.js';
import type { Pool } from '../../platform/store/db.js';
import { workflowExists } from '../../platform/temporal/connect.js';
import {
  type GatewayWithWorker,
  startGatewayWithWorker,
} from '../../test/support/gateway/gateway-with-worker.js';
import type { IngestionResult } from '../../workflows/ingestion.js';
import { TokenSet } from './auth.js';
import { DirectPublisher } from './publish.js';
import { buildGateway } from './server.js';

// These tests report rewards for tasks of their own: the campaign counts any task id.
const ACCEPT_ANY_TASK = { ingestion: { unknownTasks: 'accept' } };

const TOKEN = `tok-${randomUUID()}`;
let gw: GatewayWithWorker;
let db: Pool;
let client: Client;
let base: string;
let topic: string;
let taskQueue: string;
const workflows: string[] = [];

async function call(method: string, path: string, body?: unknown, token = TOKEN) {
  const res = await fetch(`${base}${path}`, {
    method,
    headers: {
      ...(token ? { authorization: `Bearer ${token}` } : {}),
      ...(body !== undefined ? { 'content-type': 'application/json' } : {}),
    },
    body: body !== undefined ? JSON.stringify(body) : undefined,
  });
  const text = await res.text();
  return {
    status: res.status,
    type: res.headers.get('content-type'),
    body: text ? JSON.parse(text) : undefined,
  };
}

async function topicRecords(): Promise<number> {
  const offsets = await withAdmin((a) => a.fetchTopicOffsets(topic));
  return offsets.reduce((n, o) => n + Number(o.high) - Number(o.low), 0);
}

async function readTopic(count: number): Promise<ReturnType<typeof decode>[]> {
  const out: ReturnType<typeof decode>[] = [];
  await readUntil(topic, (record) => {
    out.push(decode(record.value!));
    return out.length >= count;
  });
  return out;
}

beforeAll(async () => {
  gw = await startGatewayWithWorker({
    application: 'rods-gateway-test',
    tokens: [TOKEN],
    name: 'gateway-ingest',
    partitions: 2,
  });
  ({ db, client, base, topic, taskQueue } = gw);
}, 180_000);

afterAll(async () => {
  await gw?.close(workflows);
});

describe('gateway over HTTP', () => {
  it('creates a campaign, starts its workflow and reports its status', async () => {
    const c = `gw-http-${randomUUID().slice(0, 8)}`;
    const created = await call('POST', '/v1/campaigns', {
      campaignId: c,
      name: 'http test',
      config: { seeds: { perCategory: 1 } },
    });
    expect(created.status).toBe(201);
    expect(created.body.workflowId).toBe(`campaign-${c}`);
    workflows.push(`campaign-${c}`);
    const desc = await client.workflow.getHandle(`campaign-${c}`).describe();
    expect(desc.taskQueue).toBe(taskQueue);
    const again = await call('POST', '/v1/campaigns', { campaignId: c, config: ACCEPT_ANY_TASK });
    expect(again.status).toBe(409);
    expect(again.type).toMatch(/^application\/problem\+json/);
    const status = await call('GET', `/v1/campaigns/${c}`);
    expect(status.status).toBe(200);
    expect(status.body.campaignId).toBe(c);
    expect(status.body.name).toBe('http test');
    expect(status.body.workflow).toMatchObject({ campaignId: c, workflowId: `campaign-${c}` });
    expect(status.body.pool).toMatchObject({ campaignId: c });
    expect((await call('GET', `/v1/campaigns/${c}`, undefined, '')).status).toBe(401);
  });

  it('publishes a batch exactly once even when it is POSTed twice, then closes the step with its total', async () => {
    const c = `gw-ingest-${randomUUID().slice(0, 8)}`;
    await registerCampaign(db, { campaignId: c, config: ACCEPT_ANY_TASK });
    const a = {
      batchId: 'a',
      policyVersion: 'ckpt-1',
      groups: [
        { taskId: 't1', rewards: [0, 0.5, 1] },
        { taskId: 't2', rewards: [0.25, 0.25] },
        { taskId: 't3', rewards: [1] },
      ],
    };
    const first = await call('POST', `/v1/campaigns/${c}/steps/1/rollouts`, a);
    expect(first.status).toBe(202);
    // Published by the gateway before it answered: its records are on the topic, no workflow ran.
    expect(first.body).toEqual({
      workflowId: `ingest:${c}:1:a`,
      groups: 3,
      close: false,
      duplicate: false,
      published: true,
    });
    expect(await topicRecords()).toBe(3);
    expect(await workflowExists(client, first.body.workflowId)).toBe(false);
    const dup = await call('POST', `/v1/campaigns/${c}/steps/1/rollouts`, a);
    expect(dup.status).toBe(200);
    expect(dup.body).toEqual({
      workflowId: `ingest:${c}:1:a`,
      groups: 3,
      close: false,
      duplicate: true,
      published: true,
    });
    expect(await workflowExists(client, first.body.workflowId)).toBe(false);

    const b = {
      batchId: 'b',
      policyVersion: 'ckpt-1',
      groups: [
        { taskId: 't4', rewards: [0.75] },
        { taskId: 't1', rewards: [0.5] },
      ],
      close: true,
    };
    const second = await call('POST', `/v1/campaigns/${c}/steps/1/rollouts`, b);
    expect(second.status).toBe(202);
    expect(second.body).toMatchObject({ groups: 2, close: true, published: true });
    expect((await call('POST', `/v1/campaigns/${c}/steps/1/rollouts`, b)).status).toBe(200);
    const late = await call('POST', `/v1/campaigns/${c}/steps/1/rollouts`, {
      ...b,
      batchId: 'c',
      close: false,
    });
    expect(late.status).toBe(409);

    // 3 + 2 groups and one StepClosed: nothing else on the topic.
    expect(await topicRecords()).toBe(6);
    const records = await readTopic(6);
    const groups = records.filter((r) => r.name === 'RolloutGroupScored');
    const closes = records.filter((r) => r.name === 'StepClosed');
    expect(groups).toHaveLength(5);
    expect(new Set(groups.map((g) => (g.payload as { eventId: string }).eventId)).size).toBe(5);
    for (const g of groups)
      expect(g.payload).toMatchObject({ campaignId: c, step: 1, policyVersion: 'ckpt-1' });
    const t1 = groups
      .map((g) => g.payload as { taskId: string; rewards: number[] })
      .filter((g) => g.taskId === 't1');
    expect(t1.map((g) => g.rewards).sort()).toEqual([[0, 0.5, 1], [0.5]].sort());
    expect(closes).toHaveLength(1);
    expect(closes[0]!.payload).toMatchObject({ campaignId: c, step: 1, groupCount: 5 });
    const { rows } = await db.query<{ batch_id: string; status: string; step_groups: number | null }>(
      'select batch_id, status, step_groups from ingestion_batches where campaign_id = $1 order by batch_id',
      [c],
    );
    expect(rows).toEqual([
      { batch_id: 'a', status: 'published', step_groups: null },
      { batch_id: 'b', status: 'published', step_groups: 5 },
    ]);
  });

  it('leaves a batch to its ingestion workflow when the direct publish fails, and it lands once', async () => {
    const c = `gw-fallback-${randomUUID().slice(0, 8)}`;
    await registerCampaign(db, { campaignId: c, config: ACCEPT_ANY_TASK });
    let attempts = 0;
    const broken = buildGateway({
      db,
      temporal: client,
      tokens: new TokenSet([TOKEN]),
      taskQueue,
      rewardsTopic: topic,
      publisher: new DirectPublisher({
        db,
        topic,
        producer: {
          send: async () => {
            attempts++;
            throw new Error('broker away');
          },
        },
      }),
    });
    const before = await topicRecords();
    const batch = {
      batchId: 'f1',
      policyVersion: 'ckpt-2',
      groups: [
        { taskId: 't1', rewards: [0.5, 1] },
        { taskId: 't2', rewards: [0] },
      ],
      close: true,
    };
    try {
      const r = await broken.inject({
        method: 'POST',
        url: `/v1/campaigns/${c}/steps/1/rollouts`,
        headers: { authorization: `Bearer ${TOKEN}` },
        payload: batch,
      });
      expect(r.statusCode).toBe(202);
      expect(r.json()).toEqual({
        workflowId: `ingest:${c}:1:f1`,
        groups: 2,
        close: true,
        duplicate: false,
        published: false,
      });
      expect(attempts).toBe(1);
      workflows.push(`ingest:${c}:1:f1`);
      const done = (await client.workflow.getHandle(`ingest:${c}:1:f1`).result()) as IngestionResult;
      expect(done).toMatchObject({ groups: 2, published: 3, stepGroups: 2 });
      // A duplicate now finds it published; nothing is sent again.
      const again = await call('POST', `/v1/campaigns/${c}/steps/1/rollouts`, batch);
      expect(again).toMatchObject({ status: 200, body: { duplicate: true, published: true } });
      expect(await topicRecords()).toBe(before + 3);
      const records = await readTopic(before + 3);
      const mine = records.filter((r) => (r.payload as { campaignId: string }).campaignId === c);
      expect(mine.map((r) => r.name).sort()).toEqual([
        'RolloutGroupScored',
        'RolloutGroupScored',
        'StepClosed',
      ]);
      expect(mine.find((r) => r.name === 'StepClosed')!.payload).toMatchObject({ step: 1, groupCount: 2 });
    } finally {
      await broken.close();
    }
  });
});
