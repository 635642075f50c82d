// Metrics everywhere: the worker, gateway, relay and aggregator started as the CLI starts them,
// each with --metrics-port, against the real stack. Every /metrics serves its families (and those
// of the Grafana dashboard), and real work moves the counters: a campaign created through the
// gateway (gateway requests, worker activities, pipeline gauges, relayed events) and a rollout
// batch (ingested by the worker, applied by the aggregator). Private task queue, reward topic,
// relay name and consumer group: nothing of the shared pipeline is touched.
import { type ChildProcess, spawn } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { workflowIds } from '../domain/ids.js';
import { withAdmin } from '../platform/kafka/client.js';
import { createPool } from '../platform/store/db.js';
import { committedHeadCursor } from '../platform/store/events/event-store.js';
import { temporalClient } from '../platform/temporal/connect.js';
import { freePort } from '../platform/util/free-port.js';
import { freshRewardTopic } from '../stages/aggregator/trace.js';
import { dashboardQueries, queriedMetrics } from './support/monitoring/dashboard.js';
import { ROOT } from './support/sources.js';
import { waitUntil } from './support/wait.js';

const id = randomUUID().slice(0, 8);
const campaignId = `metrics-${id}`;
const taskQueue = `metrics-${id}`;
const TOKEN = `metrics-token-${id}`;

interface Proc {
  name: string;
  child: ChildProcess;
  metricsPort: number;
  output: () => string;
}
const procs: Proc[] = [];
const topics: string[] = [];
let gatewayBase = '';

async function start(name: string, args: string[]): Promise<Proc> {
  const metricsPort = await freePort();
  let out = '';
  const child = spawn(
    process.execPath,
    [path.join(ROOT, 'bin/rods.mjs'), ...args, '--metrics-port', String(metricsPort)],
    {
      cwd: ROOT,
      env: { ...process.env, RODS_LOG_LEVEL: 'warn', RODS_GATEWAY_TOKENS: TOKEN },
      stdio: ['ignore', 'pipe', 'pipe'],
    },
  );
  child.stdout?.on('data', (d) => {
    out += d;
  });
  child.stderr?.on('data', (d) => {
    out += d;
  });
  const p = { name, child, metricsPort, output: () => out };
  procs.push(p);
  return p;
}

/** One scrape: every sample as {name, labels, value}, and the families its # TYPE lines declare. */
async function scrape(p: Proc) {
  if (p.child.exitCode !== null) throw new Error(`${p.name} exited (${p.child.exitCode}): ${p.output()}`);
  const res = await fetch(`http://127.0.0.1:${p.metricsPort}/metrics`);
  expect(res.status).toBe(200);
  expect(res.headers.get('content-type')).toMatch(/^text\/plain; version=0\.0\.4/);
  const text = await res.text();
  const families = new Set([...text.matchAll(/^# TYPE (\S+) \S+$/gm)].map((m) => m[1]!));
  const samples = text
    .split('\n')
    .filter((l) => l && !l.startsWith('#'))
    .map((l) => {
      const m = /^([a-zA-Z_:][\w:]*)(?:\{(.*)\})? (\S+)/.exec(l)!;
      const labels = Object.fromEntries(
        [...(m[2] ?? '').matchAll(/(\w+)="((?:[^"\\]|\\.)*)"/g)].map((x) => [x[1]!, x[2]!]),
      );
      return { name: m[1]!, labels, value: Number(m[3]) };
    });
  /** The sum of a family's samples whose labels include `where`. */
  const sum = (name: string, where: Record<string, string> = {}) =>
    samples
      .filter((s) => s.name === name && Object.entries(where).every(([k, v]) => s.labels[k] === v))
      .reduce((n, s) => n + s.value, 0);
  const has = (name: string) => samples.some((s) => s.name === name);
  return { families, sum, has };
}

/** Waits until the process's /metrics answers (it serves once its service started). */
async function metricsUp(p: Proc): Promise<void> {
  await waitUntil(
    async () => {
      if (p.child.exitCode !== null) throw new Error(`${p.name} exited (${p.child.exitCode}): ${p.output()}`);
      return (await fetch(`http://127.0.0.1:${p.metricsPort}/healthz`).catch(() => undefined))?.ok;
    },
    { what: `${p.name} to serve /healthz on its metrics port`, timeoutMs: 120_000, intervalMs: 250 },
  );
}

const api = (method: string, p: string, body?: unknown) =>
  fetch(`${gatewayBase}${p}`, {
    method,
    headers: { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json' },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  });

let worker: Proc;
let gateway: Proc;
let relay: Proc;
let aggregator: Proc;

beforeAll(async () => {
  const rewards = await freshRewardTopic('metrics.rewards', 2);
  const decisions = await freshRewardTopic('metrics.decisions', 1);
  topics.push(rewards, decisions);
  const db = createPool({ application: 'rods-metrics-test', max: 1 });
  const head = await committedHeadCursor(db).finally(() => db.end());
  const gatewayPort = await freePort();
  gatewayBase = `http://127.0.0.1:${gatewayPort}`;
  worker = await start('worker', ['worker', '--task-queue', taskQueue]);
  gateway = await start('gateway', [
    'gateway',
    '--port',
    String(gatewayPort),
    '--task-queue',
    taskQueue,
    '--rewards-topic',
    rewards,
  ]);
  // Only this campaign's events, from the store's head on, to a scratch topic.
  relay = await start('relay', [
    'relay',
    '--name',
    `metrics-${id}`,
    '--start-after',
    `${head.transactionId}:${head.position}`,
    '--stream-prefix',
    `campaign-${campaignId}`,
    '--topic',
    decisions,
    '--anchor-minutes',
    '0',
  ]);
  aggregator = await start('aggregator', ['aggregator', '--group', `metrics-${id}`, '--topic', rewards]);
  for (const p of procs) await metricsUp(p);
}, 300_000);

afterAll(async () => {
  const { client, close } = await temporalClient();
  await client.workflow
    .getHandle(workflowIds.campaign(campaignId))
    .terminate('metrics test over')
    .catch(() => {});
  await close();
  for (const p of procs) if (p.child.exitCode === null) p.child.kill('SIGTERM');
  await Promise.all(
    procs.map((p) =>
      waitUntil(() => p.child.exitCode !== null || p.child.signalCode !== null, {
        what: `${p.name} to stop`,
        timeoutMs: 30_000,
      }).catch(() => p.child.kill('SIGKILL')),
    ),
  );
  await withAdmin((a) => a.deleteTopics(topics)).catch(() => {});
}, 120_000);

describe('/metrics on every process', () => {
  it('each process serves its families, and the dashboard reads only families they serve', async () => {
    const expected: Record<string, string[]> = {
      worker: ['rods_worker_activity_executions_total', 'rods_worker_activity_seconds'],
      gateway: ['rods_gateway_requests_total', 'rods_gateway_request_seconds', 'rods_campaign_pool_tasks'],
      relay: ['rods_relay_events_total', 'rods_relay_dead_letters_total', 'rods_relay_lag_events'],
      aggregator: ['rods_aggregator_events_total', 'rods_aggregator_lag', 'rods_aggregator_lag_seconds'],
    };
    const served = new Set<string>();
    for (const p of procs) {
      const s = await scrape(p);
      for (const f of [...expected[p.name]!, 'process_cpu_seconds_total', 'nodejs_eventloop_lag_p99_seconds'])
        expect(s.families, `${p.name} serves ${f}`).toContain(f);
      for (const f of s.families) served.add(f);
      expect((await fetch(`http://127.0.0.1:${p.metricsPort}/readyz`)).status, `${p.name} /readyz`).toBe(200);
    }
    const missing = dashboardQueries()
      .flatMap((q) => queriedMetrics(q.expr))
      .filter((n) => !served.has(n));
    expect(missing).toEqual([]);
  });

  it('real work moves the counters of all four processes', async () => {
    const before = await scrape(gateway);
    const route = { method: 'POST', route: '/v1/campaigns', status: '201' };
    expect(before.sum('rods_gateway_requests_total', route)).toBe(0);

    const created = await api('POST', '/v1/campaigns', {
      campaignId,
      // its batches report rewards for tasks of their own
      config: { seeds: { perCategory: 1 }, ingestion: { unknownTasks: 'accept' } },
    });
    expect(created.status).toBe(201);
    const g = await scrape(gateway);
    expect(g.sum('rods_gateway_requests_total', route)).toBe(1);
    expect(g.sum('rods_gateway_request_seconds_count', route)).toBe(1);

    // The campaign workflow seeds the pool through the worker's activities.
    await waitUntil(
      async () => (await scrape(gateway)).sum('rods_campaign_pool_tasks', { campaign: campaignId }) > 0,
      { what: 'the pool gauge of the new campaign', timeoutMs: 120_000, intervalMs: 500 },
    );
    const w = await scrape(worker);
    expect(w.sum('rods_worker_activity_executions_total', { outcome: 'completed' })).toBeGreaterThan(0);
    expect(w.sum('rods_worker_activity_seconds_count')).toBeGreaterThan(0);

    // Its events reach Kafka through the relay.
    await waitUntil(async () => (await scrape(relay)).sum('rods_relay_events_total') > 0, {
      what: 'the relay to publish the campaign events',
      timeoutMs: 60_000,
      intervalMs: 250,
    });
    const r = await scrape(relay);
    expect(r.sum('rods_relay_transaction_seconds_count')).toBeGreaterThan(0);
    expect(r.has('rods_relay_lag_events')).toBe(true);
    expect(r.sum('rods_relay_lag_seconds')).toBeGreaterThanOrEqual(0);

    // A rollout batch: published by the gateway, applied by the aggregator.
    const batch = await api('POST', `/v1/campaigns/${campaignId}/steps/0/rollouts`, {
      batchId: 'b1',
      policyVersion: 'p1',
      groups: [
        { taskId: 'metrics-t1', rewards: [0, 0.5, 1] },
        { taskId: 'metrics-t2', rewards: [0.25, 0.75] },
      ],
      close: true,
    });
    expect(batch.status).toBe(202);
    await waitUntil(async () => (await scrape(aggregator)).sum('rods_aggregator_events_total') >= 2, {
      what: 'the aggregator to consume the batch',
      timeoutMs: 90_000,
      intervalMs: 250,
    });
    const a = await scrape(aggregator);
    expect(a.sum('rods_aggregator_batch_seconds_count')).toBeGreaterThan(0);
    expect(a.has('rods_aggregator_lag')).toBe(true);
    expect(
      (await scrape(gateway)).sum('rods_gateway_requests_total', {
        route: '/v1/campaigns/:id/steps/:step/rollouts',
        status: '202',
      }),
    ).toBe(1);
  });
});
