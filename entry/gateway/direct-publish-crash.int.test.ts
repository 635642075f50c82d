// The crash windows of the gateway's direct publish: a gateway that dies after the batch's
// commit in the middle of sending its records, and one that dies after sending them all but
// before marking the batch published. Neither answers, neither starts a workflow; the trainer
// never sends again. A gateway's reconciler then starts each batch's ingestion workflow, which
// sends every record again (same event ids), and the aggregator counts each group once: the
// steps close with their declared counts and each task has exactly its groups. Real
// PostgreSQL, Kafka and Temporal: a worker, an aggregator and the campaign workflow run in this
// process (dev/harness/loop.ts); a "dead" gateway is one whose send never returns.
import { randomUUID } from 'node:crypto';
import { fileURLToPath } from 'node:url';
import { bundleWorkflowCode, Runtime } from '@temporalio/worker';
import type { FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { LoopHarness } from '../../dev/harness/loop.js';
import { decode } from '../../platform/codec/registry.js';
import { openKafka, readUntil, withAdmin } from '../../platform/kafka/client.js';
import type { OutgoingRecord } from '../../platform/kafka/port.js';
import { SharedProducer } from '../../platform/kafka/shared-producer.js';
import { installWorkerRuntime, workflowExists } from '../../platform/temporal/connect.js';
import { waitUntil } from '../../test/support/wait.js';
import { TokenSet } from './auth.js';
import { type BatchSender, DirectPublisher } from './publish.js';
import { buildGateway } from './server.js';

const TOKEN = `tok-${randomUUID()}`;
let loop: LoopHarness;
let producer: SharedProducer;
const apps: FastifyInstance[] = [];

beforeAll(async () => {
  await installWorkerRuntime('WARN');
  const workflowBundle = await bundleWorkflowCode({
    logger: Runtime.instance().logger,
    workflowsPath: fileURLToPath(new URL('../../workflows/index.ts', import.meta.url)),
  });
  loop = await LoopHarness.stepsOnly('direct-crash', workflowBundle);
  producer = new SharedProducer(() => openKafka({ clientId: 'direct-crash-test' }));
}, 180_000);

afterAll(async () => {
  // The "dead" gateways' requests never end: only the live one is closed.
  for (const app of apps) await app.close().catch(() => {});
  await producer?.close();
  if (loop) {
    await loop.terminateIngestions();
    await loop.close();
  }
});

/** A gateway that dies inside its direct publish: it sends the first `sends` records, then hangs. */
function dyingGateway(sends: (records: OutgoingRecord[]) => OutgoingRecord[]) {
  let sent = 0;
  const sender: BatchSender = {
    send: async (topic, records) => {
      const part = sends(records);
      await producer.send(topic, part);
      sent += part.length;
      return new Promise<void>(() => {});
    },
  };
  const app = buildGateway({
    db: loop.pool,
    temporal: loop.client,
    tokens: new TokenSet([TOKEN]),
    taskQueue: loop.taskQueue,
    rewardsTopic: loop.topic,
    publisher: new DirectPublisher({
      db: loop.pool,
      producer: sender,
      topic: loop.topic,
      timeoutMs: 3_600_000,
    }),
  });
  return { app, sent: () => sent };
}

const groups = (step: number) =>
  Array.from({ length: 6 }, (_, i) => ({ taskId: `t${i}`, rewards: [((step + i) % 4) / 4, 1, 0.5] }));

async function batches(): Promise<{ step: number; status: string }[]> {
  const { rows } = await loop.pool.query<{ step: string; status: string }>(
    'select step, status from ingestion_batches where campaign_id = $1 order by step',
    [loop.campaignId],
  );
  return rows.map((r) => ({ step: Number(r.step), status: r.status }));
}

async function steps(): Promise<{ step: number; declared: number | null; closed: boolean }[]> {
  const { rows } = await loop.pool.query<{ step: string; declared_groups: number | null; closed: boolean }>(
    'select step, declared_groups, closed_at is not null as closed from steps where campaign_id = $1 order by step',
    [loop.campaignId],
  );
  return rows.map((r) => ({ step: Number(r.step), declared: r.declared_groups, closed: r.closed }));
}

describe('a gateway killed during its direct publish', () => {
  it('leaves batches the reconciler publishes again, counted once by the aggregator', async () => {
    const c = loop.campaignId;
    const post = (app: FastifyInstance, step: number) =>
      app.inject({
        method: 'POST',
        url: `/v1/campaigns/${c}/steps/${step}/rollouts`,
        headers: { authorization: `Bearer ${TOKEN}` },
        payload: { batchId: `b${step}`, policyVersion: 'ckpt-1', groups: groups(step), close: true },
      });

    // Step 1: killed after the commit with half of its 6 groups sent (no StepClosed).
    const mid = dyingGateway((records) => records.slice(0, 3));
    void post(mid.app, 1);
    await waitUntil(() => mid.sent() === 3, { what: 'half of step 1 sent' });
    // Step 2: killed after all 7 records were acknowledged, before the batch was marked.
    const late = dyingGateway((records) => records);
    void post(late.app, 2);
    await waitUntil(() => late.sent() === 7, { what: 'all of step 2 sent' });
    expect(await batches()).toEqual([
      { step: 1, status: 'accepted' },
      { step: 2, status: 'accepted' },
    ]);
    for (const step of [1, 2])
      expect(await workflowExists(loop.client, `ingest:${c}:${step}:b${step}`)).toBe(false);

    // A gateway with its reconciler (as `rods gateway` runs it) publishes both through their workflows.
    const healthy = buildGateway({
      db: loop.pool,
      temporal: loop.client,
      tokens: new TokenSet([TOKEN]),
      taskQueue: loop.taskQueue,
      rewardsTopic: loop.topic,
      reconcile: { intervalMs: 200, graceMs: 500, campaigns: [c] },
    });
    apps.push(healthy);
    await healthy.ready();
    const closed = await waitUntil(
      async () => {
        const s = await steps();
        return s.length === 2 && s.every((x) => x.closed) ? s : undefined;
      },
      { what: () => `steps 1 and 2 of ${c} to close`, timeoutMs: 90_000, intervalMs: 200 },
    );
    expect(closed).toEqual([
      { step: 1, declared: 6, closed: true },
      { step: 2, declared: 6, closed: true },
    ]);
    // A step can close before its workflow marks the batch: the mark follows the send.
    const published = await waitUntil(
      async () => {
        const b = await batches();
        return b.every((x) => x.status === 'published') ? b : undefined;
      },
      { what: () => `both batches of ${c} marked published`, timeoutMs: 30_000, intervalMs: 200 },
    );
    expect(published).toEqual([
      { step: 1, status: 'published' },
      { step: 2, status: 'published' },
    ]);
    for (const step of [1, 2])
      expect(await workflowExists(loop.client, `ingest:${c}:${step}:b${step}`)).toBe(true);

    // The topic holds the repeats (3 + 7 sent by the dead gateways, 7 + 7 by the workflows) ...
    const offsets = await withAdmin((a) => a.fetchTopicOffsets(loop.topic));
    const total = offsets.reduce((n, o) => n + Number(o.high) - Number(o.low), 0);
    expect(total).toBe(24);
    const seen: ReturnType<typeof decode>[] = [];
    await readUntil(loop.topic, (r) => {
      seen.push(decode(r.value!));
      return seen.length >= total;
    });
    const ids = seen
      .filter((r) => r.name === 'RolloutGroupScored')
      .map((r) => (r.payload as { eventId: string }).eventId);
    expect(ids).toHaveLength(21);
    expect(seen.filter((r) => r.name === 'StepClosed')).toHaveLength(3);
    expect(new Set(ids).size).toBe(12);
    // ... and every group counts once: 2 groups of 3 rollouts per task.
    const { rows: stats } = await loop.pool.query<{ task_id: string; groups: number; rollouts: number }>(
      'select task_id, groups, rollouts from task_stats where campaign_id = $1 order by task_id',
      [c],
    );
    expect(stats).toEqual(groups(1).map((g) => ({ task_id: g.taskId, groups: 2, rollouts: 6 })));
  }, 180_000);
});
