// The canary: a short real campaign whose generator endpoint (the worker's, from its endpoints
// file) carries an API key and a header that appear nowhere else. The stand-in must receive the
// key; then the key and the header are searched in every row of every table, every Kafka record
// the campaign's events and rewards became, the Temporal histories of the campaign and its
// children, `rods export` output, and the output of every rods process the test started. A
// non-secret marker in the campaign config goes wherever the config goes, so each search proves
// it could have found something.
import { type ChildProcess, spawn } from 'node:child_process';
import { createHash, randomUUID } from 'node:crypto';
import { mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import type { Client } from '@temporalio/client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { LoopHarness } from '../dev/harness/loop.js';
import { type StandinProcess, standinGenerator, startStandin } from '../dev/harness/standin.js';
import { workflowIds } from '../domain/ids.js';
import { loadEndpoints } from '../platform/config/endpoints.js';
import { readUntil, withAdmin } from '../platform/kafka/client.js';
import { createPool, type Pool } from '../platform/store/db.js';
import { headCursor } from '../platform/store/events/event-store.js';
import { executeUpdateWithRetry, temporalClient, workflowEnd } from '../platform/temporal/connect.js';
import { freePort } from '../platform/util/free-port.js';
import { freshRewardTopic } from '../stages/aggregator/trace.js';
import { defaultRoute, Relay } from '../stages/relay/relay.js';
import { ROOT } from './support/sources.js';
import { waitUntil } from './support/wait.js';

const CANARY_KEY = `sk-canary-${randomUUID()}`;
const CANARY_HEADER = `hdr-canary-${randomUUID()}`;
const MARKER = `rods-marker-${randomUUID()}`;
const SECRETS = [CANARY_KEY, CANARY_HEADER];
const TOKEN = `tok-${randomUUID()}`;

interface Proc {
  name: string;
  child: ChildProcess;
  output: () => string;
}

const procs: Proc[] = [];
let standin: StandinProcess;
let loop: LoopHarness | undefined;
let pool: Pool;
let temporal: { client: Client; close: () => Promise<void> };
const dir = mkdtempSync(path.join(tmpdir(), 'rods-canary-'));

function startRods(name: string, args: string[], env: Record<string, string>): Proc {
  const child = spawn(process.execPath, [path.join(ROOT, 'bin/rods.mjs'), ...args], {
    cwd: ROOT,
    env: { ...process.env, RODS_LOG_LEVEL: 'debug', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  child.stdout!.on('data', (d) => {
    out += d;
  });
  child.stderr!.on('data', (d) => {
    out += d;
  });
  const p = { name, child, output: () => out };
  procs.push(p);
  return p;
}

async function stop(p: Proc): Promise<void> {
  if (p.child.exitCode !== null || p.child.signalCode !== null) return;
  await new Promise<void>((resolve) => {
    p.child.once('exit', () => resolve());
    p.child.kill('SIGTERM');
  });
}

/** Where each secret and the marker occur in `text` (counts). */
function count(text: string): { secrets: number; marker: number } {
  return {
    secrets: SECRETS.reduce((n, s) => n + text.split(s).length - 1, 0),
    marker: text.split(MARKER).length - 1,
  };
}

function historyText(history: unknown): string {
  const out: string[] = [];
  const seen = new Set<unknown>();
  const walk = (v: unknown): void => {
    if (v instanceof Uint8Array) out.push(Buffer.from(v).toString('latin1'));
    else if (typeof v === 'string') out.push(v);
    else if (v && typeof v === 'object' && !seen.has(v)) {
      seen.add(v);
      for (const x of Object.values(v)) walk(x);
    }
  };
  walk(history);
  return out.join('\n');
}

function filesUnder(d: string): string[] {
  return readdirSync(d).flatMap((f) => {
    const p = path.join(d, f);
    return statSync(p).isDirectory() ? filesUnder(p) : [p];
  });
}

beforeAll(async () => {
  standin = await startStandin(['--seed', '3', '--quiet']);
  pool = createPool({ application: 'rods-canary-test', max: 4 });
  temporal = await temporalClient();
}, 120_000);

afterAll(async () => {
  for (const p of procs) await stop(p);
  await loop?.close();
  await standin?.stop();
  await temporal?.close();
  await pool?.end();
  rmSync(dir, { recursive: true, force: true });
});

describe('the generator API key is the operator’s', () => {
  it('reaches the generator and nothing else: tables, Kafka, Temporal, exports, logs', async () => {
    const campaignId = `canary-${randomUUID().slice(0, 8)}`;
    const taskQueue = `rods-test-${campaignId}`;
    const startCursor = await headCursor(pool);
    const startPosition = Number(
      (await pool.query<{ p: string }>('select coalesce(max(position), 0)::text as p from events')).rows[0]!
        .p,
    );

    // The operator's endpoints file: the key by environment variable, a header inline.
    const endpointsFile = path.join(dir, 'endpoints.json');
    writeFileSync(
      endpointsFile,
      JSON.stringify({
        default: {
          baseUrl: standin.url,
          apiKeyEnv: 'RODS_CANARY_KEY',
          headers: { 'x-canary': CANARY_HEADER },
        },
      }),
    );
    const operatorEnv = { RODS_GENERATOR_ENDPOINTS_FILE: endpointsFile, RODS_CANARY_KEY: CANARY_KEY };
    const worker = startRods(
      'worker',
      ['worker', '--task-queue', taskQueue, '--sink-dir', path.join(dir, 'sink')],
      {
        ...operatorEnv,
        RODS_TEMPORAL_LOG_LEVEL: 'INFO',
      },
    );
    const port = await freePort();
    const gateway = startRods('gateway', ['gateway', '--port', String(port), '--task-queue', taskQueue], {
      ...operatorEnv,
      RODS_GATEWAY_TOKENS: TOKEN,
    });
    const gw = `http://127.0.0.1:${port}`;
    await waitUntil(
      async () => {
        if (gateway.child.exitCode !== null) throw new Error(`gateway exited: ${gateway.output()}`);
        return (await fetch(`${gw}/healthz`).catch(() => null))?.ok;
      },
      {
        what: () => `the gateway to answer: ${gateway.output().slice(-2000)}`,
        timeoutMs: 60_000,
        intervalMs: 200,
      },
    );
    const post = (config: unknown) =>
      fetch(`${gw}/v1/campaigns`, {
        method: 'POST',
        headers: { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json' },
        body: JSON.stringify({ campaignId, name: 'canary', config }),
      });
    const config = {
      notes: MARKER,
      seeds: { perCategory: 3 },
      selection: {
        budgetPerStep: 4,
        perCategoryQuota: { base: 1, miss_func: 1, miss_param: 1, long_context: 1 },
        cooldownSteps: 0,
        maxConcurrentSyntheses: 4,
      },
      generator: standinGenerator(),
    };

    // Attacks: a key, a header, a URL or an unknown endpoint in the campaign config: 422 naming
    // the field, nothing registered.
    for (const [generator, field] of [
      [{ ...config.generator, apiKey: CANARY_KEY }, 'config.generator.apiKey'],
      [
        { ...config.generator, headers: { authorization: `Bearer ${CANARY_KEY}` } },
        'config.generator.headers',
      ],
      [{ ...config.generator, baseUrl: standin.url }, 'config.generator.baseUrl'],
      [{ ...config.generator, baseUrl: 'http://attacker.example/v1' }, 'config.generator.baseUrl'],
      [{ ...config.generator, endpoint: 'elsewhere' }, 'config.generator.endpoint'],
    ] as const) {
      const r = await post({ ...config, generator });
      const body = (await r.json()) as { errors?: { field: string }[]; detail: string };
      expect(r.status, JSON.stringify(body)).toBe(422);
      expect(body.errors?.map((e) => e.field)).toEqual([field]);
      expect(JSON.stringify(body)).not.toContain(CANARY_KEY);
    }
    expect((await pool.query('select 1 from campaigns where campaign_id = $1', [campaignId])).rowCount).toBe(
      0,
    );

    // The campaign, through the gateway; the harness trains it (its in-process aggregator reads
    // the harness's reward topic; the worker is the process above).
    const created = await post(config);
    expect(created.status, await created.clone().text()).toBe(201);
    loop = new LoopHarness({ campaignId, taskQueue, config, worker: false, created: true });
    await loop.start();

    // Steps until a synthesis ended (a stage called the generator with the key).
    const keyHash = createHash('sha256').update(`Bearer ${CANARY_KEY}`).digest('hex');
    let step = 0;
    await waitUntil(
      async () => {
        step++;
        await loop!.trainStep(step);
        const s = await loop!.waitPlanned(step, 180_000);
        return s.totals.validated + s.totals.rejected > 0;
      },
      { what: () => `a synthesis of ${campaignId} to end (step ${step})`, timeoutMs: 420_000, intervalMs: 0 },
    );
    await loop.waitSynthesesDone(240_000);
    const health = (await (await fetch(standin.url.replace(/\/v1$/, '/health'))).json()) as {
      stats: { authorizations: Record<string, number> };
    };
    // The stand-in received the canary key as the bearer token (so the key was really used).
    expect(health.stats.authorizations[keyHash] ?? 0).toBeGreaterThan(0);
    const handle = loop.client.workflow.getHandle(workflowIds.campaign(campaignId));
    await executeUpdateWithRetry(handle, 'stop', [{ reason: 'canary test over' }]);
    await waitUntil(
      async () => (await workflowEnd(loop!.client, workflowIds.campaign(campaignId))) === 'completed',
      {
        what: `the campaign ${campaignId} to complete`,
        timeoutMs: 120_000,
        intervalMs: 250,
      },
    );

    // GET /v1/campaigns/:id: the endpoint name, nothing of the endpoint.
    const got = await (
      await fetch(`${gw}/v1/campaigns/${campaignId}`, { headers: { authorization: `Bearer ${TOKEN}` } })
    ).text();
    expect.soft(count(got).secrets).toBe(0);
    expect(got).not.toContain(standin.url);

    // 1. Every row of every table (events: those written since the test started; the table is append-only).
    const owner = loadEndpoints().ownerDatabaseUrl;
    const reader = createPool({
      application: 'rods-canary-search',
      max: 1,
      ...(owner ? { connectionString: owner } : {}),
    });
    const tableHits: Record<string, { rows: number; secrets: number; marker: number }> = {};
    try {
      const tables = await reader.query<{ s: string; t: string; bytea: string[] | null }>(
        `select t.table_schema as s, t.table_name as t,
                array_agg(c.column_name::text) filter (where c.data_type = 'bytea') as bytea
           from information_schema.tables t
           join information_schema.columns c using (table_schema, table_name)
          where t.table_type = 'BASE TABLE' and t.table_schema not in ('pg_catalog', 'information_schema')
          group by 1, 2 order by 1, 2`,
      );
      expect(tables.rows.length).toBeGreaterThan(10);
      for (const { s, t, bytea } of tables.rows) {
        const q = (i: number) =>
          [
            `strpos(x::text, $${i}) > 0`,
            ...(bytea ?? []).map((c) => `position(convert_to($${i}, 'UTF8') in x."${c}") > 0`),
          ].join(' or ');
        const where = s === 'public' && t === 'events' ? `where position > ${startPosition}` : '';
        const r = await reader.query<{ rows: number; k: number; h: number; m: number }>(
          `select count(*)::int as rows, count(*) filter (where ${q(1)})::int as k,
                  count(*) filter (where ${q(2)})::int as h, count(*) filter (where ${q(3)})::int as m
             from "${s}"."${t}" x ${where}`,
          [CANARY_KEY, CANARY_HEADER, MARKER],
        );
        const row = r.rows[0]!;
        tableHits[`${s}.${t}`] = { rows: row.rows, secrets: row.k + row.h, marker: row.m };
      }
    } finally {
      await reader.end();
    }
    expect.soft(Object.entries(tableHits).filter(([, h]) => h.secrets > 0)).toEqual([]);
    // The config (with the marker) is in CampaignStarted, the campaigns table and its versions.
    expect(tableHits['public.events']!.marker).toBeGreaterThan(0);
    expect(tableHits['public.campaigns']!.marker).toBe(1);
    expect(tableHits['public.campaign_configs']!.marker).toBe(1);

    // 2. Kafka: the harness's reward topic, and the campaign's events relayed as the relay would
    // (decisions, task statistics: the same records, routed to one fresh topic here so the test
    // reads exactly what it relayed).
    const relayTopic = await freshRewardTopic(`canary.relay.${campaignId}`, 3);
    // Other test files append meanwhile (some deliberately unencodable events): the campaign's own
    // events must all be routed (an event is routed only once it encodes).
    let routedOurs = 0;
    const relay = new Relay(pool, {
      name: `canary-${campaignId}`,
      startAfter: startCursor,
      route: (e) => {
        if ((e.payload as { campaignId?: unknown } | null)?.campaignId === campaignId) routedOurs++;
        return { topic: relayTopic, key: defaultRoute(e).key };
      },
    });
    await relay.start();
    await relay.run({ untilCaughtUp: true });
    await relay.stop();
    const ours = await pool.query<{ n: number }>(
      `select count(*)::int as n from events where payload->>'campaignId' = $1 and position > $2`,
      [campaignId, startPosition],
    );
    expect(routedOurs).toBe(ours.rows[0]!.n);
    const kafka: Record<string, { records: number; secrets: number; marker: number }> = {};
    const searchTopic = async (topic: string, expected: number) => {
      const seen = { records: 0, secrets: 0, marker: 0 };
      await readUntil(
        topic,
        (r) => {
          const text = Buffer.concat([
            r.key ?? Buffer.alloc(0),
            r.value ?? Buffer.alloc(0),
            ...Object.entries(r.headers).flatMap(([k, v]) => [Buffer.from(k), v]),
          ]).toString('latin1');
          const c = count(text);
          seen.records++;
          seen.secrets += c.secrets;
          seen.marker += c.marker;
          return seen.records >= expected;
        },
        { timeoutMs: 120_000 },
      );
      kafka[topic] = seen;
    };
    const rewardRecords = (await withAdmin((a) => a.fetchTopicOffsets(loop!.topic))).reduce(
      (n, p) => n + Number(p.high) - Number(p.low),
      0,
    );
    expect(rewardRecords).toBeGreaterThan(0);
    await searchTopic(loop.topic, rewardRecords);
    await searchTopic(relayTopic, relay.stats.published);
    await withAdmin((a) => a.deleteTopics([relayTopic])).catch(() => {});
    expect.soft(Object.values(kafka).map((k) => k.secrets)).toEqual([0, 0]);
    expect(kafka[relayTopic]!.marker).toBeGreaterThan(0);

    // 3. Temporal: every run of the campaign workflow and of each synthesis child.
    const synthesisIds = (
      await pool.query<{ id: string }>(
        `select distinct payload->>'synthesisId' as id from events
          where type = 'SynthesisStarted' and payload->>'campaignId' = $1 and position > $2`,
        [campaignId, startPosition],
      )
    ).rows.map((r) => r.id);
    expect(synthesisIds.length).toBeGreaterThan(0);
    const histories: Record<string, { secrets: number; marker: number }> = {};
    for (const id of [
      workflowIds.campaign(campaignId),
      ...synthesisIds.map((s) => workflowIds.synthesis(s)),
    ]) {
      for await (const run of temporal.client.workflow.list({ query: `WorkflowId = '${id}'` })) {
        const history = await temporal.client.workflow.getHandle(id, run.runId).fetchHistory();
        // Every string and every byte field (payloads are JSON bytes) as text, walked by hand:
        // the messages' own toJSON would turn the bytes into base64.
        const text = historyText(history);
        histories[`${id}/${run.runId}`] = count(text);
      }
    }
    expect(Object.keys(histories).length).toBeGreaterThan(synthesisIds.length);
    expect.soft(Object.entries(histories).filter(([, h]) => h.secrets > 0)).toEqual([]);
    // Each history carries the config (campaign input, child inputs): the search reads payloads.
    expect(Object.entries(histories).filter(([, h]) => h.marker === 0)).toEqual([]);

    // 4. rods export, every format: its files and its output.
    const exported: Record<string, { secrets: number; marker: number }> = {};
    for (const format of ['jsonl', 'csv', 'openlineage']) {
      const out = path.join(dir, `export-${format}`);
      const p = startRods(
        `export-${format}`,
        ['export', '--campaign', campaignId, '--format', format, '--out', out],
        {},
      );
      const code = await new Promise<number | null>((resolve) => p.child.once('exit', resolve));
      expect(code, p.output()).toBe(0);
      const text = [p.output(), ...filesUnder(out).map((f) => readFileSync(f, 'latin1'))].join('\n');
      exported[format] = count(text);
    }
    expect.soft(Object.values(exported).map((e) => e.secrets)).toEqual([0, 0, 0]);
    expect(exported.jsonl!.marker).toBeGreaterThan(0);
    expect(exported.csv!.marker).toBeGreaterThan(0);

    // 5. The output of every rods process this test started (the worker logs its endpoints by name).
    for (const p of [worker, gateway]) await stop(p);
    expect(worker.output()).toContain(`generator endpoints: default (${new URL(standin.url).origin})`);
    expect(gateway.output()).toContain('"statusCode":422');
    expect.soft(procs.map((p) => [p.name, count(p.output()).secrets])).toEqual(procs.map((p) => [p.name, 0]));
  }, 900_000);
});
