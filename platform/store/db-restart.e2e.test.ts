// The long-running processes ride out PostgreSQL restarts. A PRIVATE PostgreSQL cluster (own data
// directory under .stack/tmp, free port) serves a real `rods worker`, `rods aggregator`,
// `rods relay` and `rods gateway`; the shared Kafka and Temporal are used with unique topics,
// group, relay name and task queue. The cluster is restarted (`pg_ctl restart -m fast`) and then
// stopped for a while and started again; after each, every process is still alive and does its
// work: the gateway accepts a batch and publishes it, the aggregator folds it and closes the
// step, the worker runs the campaign's activities, and the relay publishes the events appended
// meanwhile.
import { type ChildProcess, spawn } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { chmodSync, mkdirSync, rmSync, statSync } from 'node:fs';
import { userInfo } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { run } from '../../infra/stack/proc.js';
import { freshRewardTopic } from '../../stages/aggregator/trace.js';
import { ROOT } from '../../test/support/sources.js';
import { staysFalse, waitUntil } from '../../test/support/wait.js';
import { ensureTopics, withAdmin } from '../kafka/client.js';
import { relayCheckpoint } from '../kafka/relay-checkpoint.js';
import { freePort } from '../util/free-port.js';
import { registerCampaign } from './campaigns.js';
import { createClient, createPool } from './db.js';
import { migrate } from './migrate.js';

// Its own server, its own password (never the well-known default).
const PASSWORD = randomUUID();
const BIN = process.env.RODS_PG_BINDIR ?? '/usr/lib/postgresql/15/bin';
const id = randomUUID().slice(0, 8);
const DIR = path.join(ROOT, '.stack', 'tmp', `db-restart-${id}`);
const DATA = path.join(DIR, 'data');
const SOCKET = path.join(DIR, 'socket');
const PG_LOG = path.join(DIR, 'postgres.log');
const TOKEN = `tok-${id}`;
const campaignId = `dbr-${id}`;
const taskQueue = `db-restart-${id}`;
const group = `db-restart-${id}`;
const relayName = `db-restart-${id}`;
const relayTopic = `db-restart.relay.${id}`;

let pgPort = 0;
let url = '';
let asServer: { uid?: number; gid?: number } = {};
let rewardsTopic = '';
let gatewayPort = 0;
let metricsPort = 0;
const procs = new Map<string, { child: ChildProcess; output: string; exit?: string }>();

// --- the private cluster --------------------------------------------------------------------

async function serverAccount(): Promise<{ uid?: number; gid?: number }> {
  if (userInfo().uid !== 0) return {};
  // The server refuses to run as root: it runs as the postgres user, as in infra/stack/postgres.ts.
  const uid = Number((await run('id', ['-u', 'postgres'])).stdout.trim());
  const gid = Number((await run('id', ['-g', 'postgres'])).stdout.trim());
  return { uid, gid };
}

const pgCtl = (args: string[]) => run(path.join(BIN, 'pg_ctl'), ['-D', DATA, ...args], asServer);

async function pgStart(): Promise<void> {
  const opts = [
    '-c listen_addresses=127.0.0.1',
    `-c port=${pgPort}`,
    `-c unix_socket_directories=${SOCKET}`,
    '-c max_connections=100',
    '-c shared_buffers=32MB',
    '-c fsync=off',
  ].join(' ');
  await pgCtl(['-l', PG_LOG, '-o', opts, '-w', '-t', '60', 'start']);
}

// With -l: the server must not inherit our pipes (run() would wait for them to close).
const pgRestart = () => pgCtl(['-l', PG_LOG, '-m', 'fast', '-w', '-t', '60', 'restart']);

async function startCluster(): Promise<void> {
  asServer = await serverAccount();
  mkdirSync(SOCKET, { recursive: true, mode: 0o755 });
  mkdirSync(DATA, { recursive: true, mode: 0o700 });
  if (asServer.uid !== undefined) {
    // The server user must reach the data directory: o+x on the ancestors that lack it.
    for (let d = path.dirname(DIR); d !== path.dirname(d); d = path.dirname(d)) {
      const mode = statSync(d).mode;
      if ((mode & 0o001) === 0) chmodSync(d, mode | 0o001);
    }
    await run('chown', ['-R', `${asServer.uid}:${asServer.gid}`, DIR]);
  }
  await run(
    path.join(BIN, 'initdb'),
    ['-D', DATA, '-U', 'postgres', '--auth=trust', '-E', 'UTF8', '--locale=C.UTF-8'],
    asServer,
  );
  pgPort = await freePort();
  await pgStart();
  const admin = createClient({ host: SOCKET, port: pgPort, user: 'postgres', database: 'postgres' });
  await admin.connect();
  try {
    await admin.query(`create role rods login password '${PASSWORD}'`);
    await admin.query('create database rods owner rods');
  } finally {
    await admin.end();
  }
  url = `postgres://rods:${PASSWORD}@127.0.0.1:${pgPort}/rods`;
  await migrate({ databaseUrl: url });
}

/** One query on a short-lived connection (nothing idle in the test process across restarts). */
async function query<T>(sql: string, params: unknown[] = []): Promise<T[]> {
  const c = createClient({ connectionString: url, connectionTimeoutMillis: 3000 });
  try {
    await c.connect();
    return (await c.query(sql, params)).rows as T[];
  } finally {
    await c.end().catch(() => {});
  }
}

// --- the rods processes ---------------------------------------------------------------------

function startRods(name: string, args: string[]): void {
  const child = spawn(process.execPath, [path.join(ROOT, 'bin/rods.mjs'), ...args], {
    cwd: ROOT,
    env: {
      ...process.env,
      DATABASE_URL: url,
      // One role owns everything on this private server: it migrates too.
      RODS_MIGRATE_DATABASE_URL: url,
      RODS_TASK_QUEUE: taskQueue,
      RODS_GATEWAY_TOKENS: TOKEN,
      RODS_SINK_DIR: path.join(DIR, 'sink'),
      RODS_LOG_LEVEL: 'info',
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const p: { child: ChildProcess; output: string; exit?: string } = { child, output: '' };
  const keep = (b: Buffer) => {
    p.output = (p.output + b.toString()).slice(-200_000);
  };
  child.stdout?.on('data', keep);
  child.stderr?.on('data', keep);
  child.on('exit', (code, signal) => {
    p.exit = `exited with ${signal ?? code}`;
  });
  procs.set(name, p);
}

const dead = () => [...procs].filter(([, p]) => p.exit !== undefined);
const describeDead = () => {
  const d = dead();
  if (d.length === 0) return 'every process alive';
  const names = d.map(([n, p]) => `${n} ${p.exit}`).join(', ');
  return `${names}; last output:\n${d.map(([n, p]) => `--- ${n}\n${p.output.slice(-1500)}`).join('\n')}`;
};

async function httpStatus(u: string, init?: RequestInit): Promise<number> {
  try {
    return (await fetch(u, { ...init, signal: AbortSignal.timeout(5000) })).status;
  } catch {
    return 0;
  }
}

const gateway = (p: string) => `http://127.0.0.1:${gatewayPort}${p}`;
const readyz = async () => ({
  gateway: await httpStatus(gateway('/readyz')),
  aggregator: await httpStatus(`http://127.0.0.1:${metricsPort}/readyz`),
});

async function postBatch(step: number): Promise<number> {
  return httpStatus(gateway(`/v1/campaigns/${campaignId}/steps/${step}/rollouts`), {
    method: 'POST',
    headers: { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json' },
    body: JSON.stringify({
      batchId: `b${step}`,
      policyVersion: 'ckpt-1',
      groups: [
        { taskId: 't1', rewards: [0, 0.5, 1, 0.25] },
        { taskId: 't2', rewards: [1, 1, 0, 0.5] },
      ],
      close: true,
    }),
  });
}

async function stepClosed(step: number): Promise<boolean> {
  try {
    const rows = await query<{ closed: boolean }>(
      'select closed_at is not null as closed from steps where campaign_id = $1 and step = $2',
      [campaignId, step],
    );
    return rows[0]?.closed === true;
  } catch {
    return false;
  }
}

async function relayCaughtUp(): Promise<boolean> {
  try {
    const [head] = await query<{ p: number | null }>('select max(position)::int as p from events');
    const cp = await withAdmin((a) => relayCheckpoint(a, relayName));
    return head?.p != null && cp.position >= head.p;
  } catch {
    return false;
  }
}

/** One round of real work through every process: batch -> ingestion -> aggregation -> relay. */
async function roundTrip(step: number): Promise<void> {
  // The gateway answers 503 while it still finds the database away; a trainer retries (200: a
  // batch sent before a restart, recorded then).
  let last = 0;
  await waitUntil(
    async () => {
      last = await postBatch(step);
      return last === 200 || last === 202;
    },
    {
      what: () => `the gateway to accept the batch of step ${step}, last ${last} (${describeDead()})`,
      timeoutMs: 90_000,
      intervalMs: 500,
    },
  );
  await waitUntil(() => stepClosed(step), {
    what: () => `step ${step} to be ingested, aggregated and closed (${describeDead()})`,
    timeoutMs: 120_000,
    intervalMs: 250,
  });
  await waitUntil(relayCaughtUp, {
    what: () => `the relay to publish the events up to the head (${describeDead()})`,
    timeoutMs: 90_000,
    intervalMs: 250,
  });
  expect(dead(), describeDead()).toEqual([]);
}

beforeAll(async () => {
  await startCluster();
  const pool = createPool({ connectionString: url, max: 2, application: 'rods-db-restart-test' });
  try {
    await registerCampaign(pool, {
      campaignId,
      config: { rolloutsPerTask: 4, ingestion: { unknownTasks: 'accept' } },
    });
  } finally {
    await pool.end();
  }
  rewardsTopic = await freshRewardTopic('db-restart.rewards', 2);
  await withAdmin((a) =>
    ensureTopics(a, [
      { name: relayTopic, key: 'any', partitions: 1, replicationFactor: 1, config: {}, doc: 'test' },
    ]),
  );
  gatewayPort = await freePort();
  metricsPort = await freePort();
  startRods('worker', ['worker', '--task-queue', taskQueue]);
  startRods('aggregator', [
    'aggregator',
    '--group',
    group,
    '--topic',
    rewardsTopic,
    '--metrics-port',
    String(metricsPort),
    '--session-timeout-ms',
    '10000',
  ]);
  startRods('relay', ['relay', '--name', relayName, '--topic', relayTopic]);
  startRods('gateway', [
    'gateway',
    '--port',
    String(gatewayPort),
    '--task-queue',
    taskQueue,
    '--rewards-topic',
    rewardsTopic,
  ]);
  await waitUntil(
    async () => {
      const r = await readyz();
      return (
        r.gateway === 200 && r.aggregator === 200 && procs.get('worker')!.output.includes('rods worker on')
      );
    },
    { what: () => `every process to be up (${describeDead()})`, timeoutMs: 150_000, intervalMs: 500 },
  );
}, 240_000);

afterAll(async () => {
  for (const [, p] of procs) if (p.exit === undefined) p.child.kill('SIGTERM');
  await waitUntil(() => dead().length === procs.size, {
    what: 'the processes to exit',
    timeoutMs: 20_000,
  }).catch(() => {
    for (const [, p] of procs) if (p.exit === undefined) p.child.kill('SIGKILL');
  });
  if (pgPort) await pgCtl(['-m', 'immediate', '-w', 'stop']).catch(() => {});
  rmSync(DIR, { recursive: true, force: true });
  const topics = [rewardsTopic, relayTopic].filter(Boolean);
  if (topics.length) await withAdmin((a) => a.deleteTopics(topics)).catch(() => {});
}, 60_000);

/** A pool long-poll: keeps the gateway querying PostgreSQL every 250 ms while it lasts. */
function longPoll(): void {
  fetch(gateway(`/v1/campaigns/${campaignId}/pool?wait=30`), {
    headers: { authorization: `Bearer ${TOKEN}`, 'if-none-match': '*' },
  }).catch(() => {});
}

async function steps(from: number, to: number): Promise<void> {
  for (let s = from; s <= to; s++) await roundTrip(s);
}

describe('a PostgreSQL restart', () => {
  it('is ridden out by the worker, aggregator, relay and gateway', async () => {
    await roundTrip(1);

    // A fast restart (every connection terminated by the administrator) while every process
    // holds connections: the gateway serves a long-poll, the worker ingests a fresh batch.
    longPoll();
    expect(await postBatch(2)).toBe(202);
    await pgRestart();
    await roundTrip(2);
    await roundTrip(3);
    expect(await readyz()).toEqual({ gateway: 200, aggregator: 200 });

    // An outage of several seconds, then the server is back.
    longPoll();
    await pgCtl(['-m', 'fast', '-w', '-t', '60', 'stop']);
    await waitUntil(
      async () => {
        const r = await readyz();
        return r.gateway === 503 && r.aggregator === 503;
      },
      { what: 'the gateway and the aggregator to report not ready', timeoutMs: 30_000, intervalMs: 200 },
    );
    expect(await postBatch(4)).toBe(503);
    // Every process stays up through the outage (RODS_TEST_DB_OUTAGE_MS for a longer one).
    const outageMs = Number(process.env.RODS_TEST_DB_OUTAGE_MS ?? 5000);
    await staysFalse(() => dead().length > 0, outageMs, { what: describeDead, intervalMs: 200 });
    await pgStart();
    await waitUntil(
      async () => {
        const r = await readyz();
        return r.gateway === 200 && r.aggregator === 200;
      },
      { what: 'the gateway and the aggregator to report ready again', timeoutMs: 30_000, intervalMs: 200 },
    );
    await steps(4, 5);

    // Each process said that the database went away and that it came back.
    for (const name of ['aggregator', 'relay', 'gateway']) {
      expect(procs.get(name)!.output, name).toContain('PostgreSQL connection lost');
      expect(procs.get(name)!.output, name).toContain('PostgreSQL reachable again');
    }
  }, 600_000);
});
