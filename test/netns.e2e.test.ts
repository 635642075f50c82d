// Across machines, for real: three network namespaces of the test's own (test/support/netns.ts)
// stand for three machines. The secured stack's services (PostgreSQL TLS-only, Kafka SASL_SSL,
// Temporal behind nginx with mutual TLS) run in `services`, reached by the name
// services.rods.test; rods' processes (worker, aggregator, relay, the executor beside the worker,
// the stand-in generator, the gateway over HTTPS) in `rods`; the simulated trainer in `trainer`,
// which has a link to `rods` only and reaches the gateway by its name gateway.rods.test over
// HTTPS, trusting the stack's CA. A campaign runs through it end to end, then every namespace is
// checked for sockets listening where they were not told to.
import type { ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync, mkdirSync, openSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { linkInstalled } from '../infra/stack/link.js';
import {
  DEFAULT_SECURE_PORTS,
  ensureSecureFiles,
  type SecureFiles,
  secureStackEnv,
} from '../infra/stack/secure.js';
import {
  createNetnsLab,
  type ExecResult,
  loopbackAddress,
  type NetnsLab,
  netnsUnavailable,
  removeStaleNamespaces,
  wildcardAddress,
} from './support/netns.js';
import { ELSEWHERE as SHARED_STACK_SETTINGS } from './support/secure-stack.js';
import { ROOT } from './support/sources.js';
import { waitUntil } from './support/wait.js';

const SERVICES = 'services.rods.test';
const GATEWAY = 'gateway.rods.test';
// Each namespace has its own ports: the secured stack's defaults, the gateway's and the stand-in's.
const PORTS = DEFAULT_SECURE_PORTS;
const GATEWAY_PORT = 7500;
const STANDIN_PORT = 7400;
const GW = `https://${GATEWAY}:${GATEWAY_PORT}`;
const STEPS = 4;
const PER_CATEGORY = 5;
const TSX = path.join(ROOT, 'node_modules/tsx/dist/cli.mjs');

/** Settings of the test's own (shared) stack that would point a process elsewhere, and its CAs. */
const ELSEWHERE = [...SHARED_STACK_SETTINGS, 'NODE_EXTRA_CA_CERTS', 'RODS_CA_BUNDLE'];

const unavailable = netnsUnavailable();
if (unavailable) console.warn(`SKIPPED test/netns.e2e.test.ts (network namespaces): ${unavailable}`);

const tail = (file: string, lines = 40) =>
  existsSync(file) ? readFileSync(file, 'utf8').split('\n').slice(-lines).join('\n') : '(no log)';

describe.skipIf(unavailable !== undefined)('rods across three network namespaces, secured', () => {
  let lab: NetnsLab;
  let dir: string;
  let files: SecureFiles;
  /** rods' processes and the stack manager: the secured stack reached at services.rods.test. */
  let env: NodeJS.ProcessEnv;
  /** The trainer's: the stack's CA, nothing of the stack (it knows only the gateway). */
  let trainerEnv: NodeJS.ProcessEnv;
  let logs: string;
  const adminToken = randomBytes(16).toString('hex');
  const trainerToken = randomBytes(16).toString('hex');
  const campaignId = `netns-${randomBytes(4).toString('hex')}`;
  const procs: ChildProcess[] = [];
  let failed = false;

  const describeRun = (what: string, r: ExecResult) =>
    `${what} exited ${r.code}\n--- stdout ---\n${r.stdout.slice(-4000)}\n--- stderr ---\n${r.stderr.slice(-4000)}`;
  /** Runs to its end in a namespace and must succeed. */
  const must = async (role: string, cmd: string, args: string[], e: NodeJS.ProcessEnv = env) => {
    const r = await lab.exec(role, cmd, args, { env: e, cwd: ROOT });
    if (r.code !== 0) throw new Error(describeRun(`${cmd} ${args.join(' ')} in ${lab.ns(role)}`, r));
    return r.stdout;
  };
  const stack = (role: string, args: string[], extra: NodeJS.ProcessEnv = {}) =>
    must(role, process.execPath, [TSX, path.join(ROOT, 'infra/stack/cli.ts'), ...args], { ...env, ...extra });
  const rods = (args: string[]) => must('rods', process.execPath, [path.join(ROOT, 'bin/rods.mjs'), ...args]);
  /** A rods (or rods-dev) process in the rods namespace, its output in logs/<name>.log. */
  const start = (name: string, args: string[], bin: 'rods' | 'rods-dev' = 'rods') => {
    const fd = openSync(path.join(logs, `${name}.log`), 'a');
    const child = lab.spawnIn('rods', process.execPath, [path.join(ROOT, `bin/${bin}.mjs`), ...args], {
      cwd: ROOT,
      env,
      stdio: ['ignore', fd, fd],
    });
    procs.push(child);
    return child;
  };
  /** curl in the trainer's namespace, trusting the stack's CA unless `ca: false`. */
  const curl = (args: string[], opts: { ca?: boolean; input?: string } = {}) =>
    lab.exec(
      'trainer',
      'curl',
      ['-sS', '--max-time', '30', ...(opts.ca === false ? [] : ['--cacert', files.ca]), ...args],
      { env: trainerEnv, input: opts.input },
    );
  /** A gateway request from the trainer's namespace: its status and body. */
  const api = async (method: string, route: string, token: string, body?: unknown) => {
    const r = await curl(
      [
        '-X',
        method,
        '-H',
        `authorization: Bearer ${token}`,
        ...(body === undefined ? [] : ['-H', 'content-type: application/json', '--data-binary', '@-']),
        '-w',
        '\n%{http_code}',
        `${GW}${route}`,
      ],
      { input: body === undefined ? undefined : JSON.stringify(body) },
    );
    if (r.code !== 0) throw new Error(describeRun(`curl ${method} ${route}`, r));
    const i = r.stdout.lastIndexOf('\n');
    return { status: Number(r.stdout.slice(i + 1)), body: r.stdout.slice(0, i) };
  };

  /** The three machines, the stack on them, rods' processes and the gateway answering the trainer. */
  const setUp = async () => {
    await removeStaleNamespaces();
    lab = await createNetnsLab({
      roles: ['services', 'rods', 'trainer'],
      links: [
        ['services', 'rods'],
        ['rods', 'trainer'],
      ],
      hosts: {
        // The broker reaches itself by the name it advertises; nginx and PostgreSQL listen on it.
        services: { [SERVICES]: 'services>rods' },
        rods: { [SERVICES]: 'services', [GATEWAY]: 'rods>trainer' },
        trainer: { [GATEWAY]: 'rods' },
      },
    });
    const shared = path.join(ROOT, '.stack');
    dir = path.join(shared, `netns-${lab.id}`);
    linkInstalled(shared, dir);
    logs = path.join(dir, 'logs');
    mkdirSync(logs, { recursive: true });
    files = ensureSecureFiles(dir, { names: [SERVICES, GATEWAY, 'localhost', '127.0.0.1'] });
    env = { ...process.env };
    for (const k of ELSEWHERE) delete env[k];
    Object.assign(env, secureStackEnv(dir, PORTS, SERVICES), { RODS_LOG_LEVEL: 'warn' });
    trainerEnv = { PATH: process.env.PATH, HOME: process.env.HOME, NODE_EXTRA_CA_CERTS: files.ca };

    // The services' machine: its address is its own, so the stack manager starts them on it.
    await stack('services', ['up', '--services', 'postgres,kafka,temporal'], { RODS_STACK_MANAGE: '1' });
    // rods' machine: the executor on its loopback, beside the worker that calls it.
    await stack('rods', ['up', '--services', 'executor']);
    await rods(['migrate']);

    const tokens = path.join(files.dir, 'gateway-tokens');
    writeFileSync(tokens, `${adminToken} admin\n${trainerToken} campaign:${campaignId}\n`, { mode: 0o600 });
    Object.assign(env, {
      RODS_TASK_QUEUE: `rods-netns-${lab.id}`,
      RODS_GATEWAY_TOKENS_FILE: tokens,
      RODS_SINK_DIR: path.join(dir, 'pool-sink'),
      RODS_GENERATOR_BASE_URL: `http://127.0.0.1:${STANDIN_PORT}/v1`,
    });
    start(
      'standin-generator',
      ['standin-generator', '--port', String(STANDIN_PORT), '--seed', '1', '--quiet'],
      'rods-dev',
    );
    start('worker', ['worker']);
    start('aggregator', ['aggregator', '--session-timeout-ms', '6000']);
    start('relay', ['relay']);
    // HTTPS (RODS_GATEWAY_TLS_CERT/KEY of the stack's env) on the address facing the trainer only.
    start('gateway', ['gateway', '--host', lab.addr('rods', 'trainer'), '--port', String(GATEWAY_PORT)]);
    await waitUntil(
      async () => {
        for (const p of procs)
          if (p.exitCode !== null) throw new Error(`a rods process exited during start-up (logs in ${logs})`);
        return (await curl([`${GW}/healthz`])).stdout.includes('"ok":true');
      },
      {
        what: `the gateway to answer ${GW}/healthz from the trainer's namespace`,
        timeoutMs: 120_000,
        intervalMs: 250,
      },
    );
  };

  beforeAll(async () => {
    try {
      await setUp();
    } catch (e) {
      failed = true; // afterAll prints the logs
      throw e;
    }
  }, 600_000);

  afterEach((ctx) => {
    if (ctx.task.result?.state === 'fail') failed = true;
  });

  afterAll(async () => {
    if (!lab) return;
    if (failed && existsSync(logs))
      for (const f of readdirSync(logs)) console.error(`--- tail of ${f} ---\n${tail(path.join(logs, f))}`);
    for (const p of procs) if (p.exitCode === null && p.signalCode === null) p.kill('SIGTERM');
    await waitUntil(() => procs.every((p) => p.exitCode !== null || p.signalCode !== null), {
      what: "rods' processes to stop",
      timeoutMs: 30_000,
    }).catch((e) => console.error((e as Error).message));
    await stack('rods', ['down', '--services', 'executor']).catch((e) => console.error(e));
    await stack('services', ['down', '--services', 'postgres,kafka,temporal'], {
      RODS_STACK_MANAGE: '1',
    }).catch((e) => console.error(e));
    await lab.teardown();
    rmSync(dir, { recursive: true, force: true });
  }, 300_000);

  it('the trainer reaches the gateway only, over HTTPS with the stack CA', async () => {
    // Without the stack's CA the gateway's certificate is not trusted (curl: 60).
    expect((await curl([`${GW}/healthz`], { ca: false })).code).toBe(60);
    // Plain HTTP on the gateway's port gets no answer.
    const plain = await curl(['-w', '%{http_code}', `http://${GATEWAY}:${GATEWAY_PORT}/healthz`], {
      ca: false,
    });
    expect(plain.stdout).not.toContain('"ok":true');
    // The services' name means nothing there, and their address has no route (curl: 7).
    expect((await lab.exec('trainer', 'getent', ['hosts', SERVICES])).code).not.toBe(0);
    const db = await curl([
      '--connect-timeout',
      '10',
      `https://${lab.addr('services', 'rods')}:${PORTS.postgres}`,
    ]);
    expect(db.code, db.stderr).toBe(7);
    expect(db.stderr).toMatch(/unreachable|Couldn't connect/i);
  });

  it('a campaign runs end to end: created, seeded, trained for a few steps, aggregated', async () => {
    const example = JSON.parse(readFileSync(path.join(ROOT, 'dev/examples/campaign.standin.json'), 'utf8'));
    const { campaignId: _c, name: _n, ...config } = example as Record<string, unknown>;
    config.seeds = { perCategory: PER_CATEGORY };
    const created = await api('POST', '/v1/campaigns', adminToken, {
      campaignId,
      name: 'across three network namespaces',
      config,
    });
    expect(created.status, created.body).toBe(201);
    // The trainer's token may read its campaign's pool, which the worker seeds from the executor.
    const seeded = await waitUntil(
      async () => {
        const r = await api('GET', `/v1/campaigns/${campaignId}/pool`, trainerToken);
        if (r.status !== 200) return undefined;
        const pool = JSON.parse(r.body) as { version: number; tasks: { taskId: string }[] };
        return pool.tasks.length > 0 ? pool : undefined;
      },
      { what: 'the pool to be seeded', timeoutMs: 180_000, intervalMs: 500 },
    );
    expect(seeded.tasks).toHaveLength(4 * PER_CATEGORY);

    // The simulated trainer (rods-dev simulate-trainer): Node's fetch over HTTPS, the CA from
    // NODE_EXTRA_CA_CERTS; it waits for the campaign to plan each step it closes.
    const run = await lab.exec(
      'trainer',
      process.execPath,
      [
        path.join(ROOT, 'bin/rods-dev.mjs'),
        'simulate-trainer',
        '--campaign',
        campaignId,
        '--gateway',
        GW,
        '--token',
        trainerToken,
        '--steps',
        String(STEPS),
        '--json',
      ],
      { env: trainerEnv, cwd: ROOT },
    );
    expect(run.code, describeRun('simulate-trainer', run)).toBe(0);
    const reports = run.stdout
      .split('\n')
      .filter((l) => l.startsWith('{'))
      .map((l) => JSON.parse(l) as { step: number; groups: number; poolVersion: number });
    expect(reports.map((r) => r.step)).toEqual([1, 2, 3, 4]);
    for (const r of reports) expect(r.groups).toBeGreaterThan(0);
    const posted = reports.reduce((a, r) => a + r.groups, 0);

    // Read back through the gateway: the campaign planned every step the trainer closed.
    const status = await api('GET', `/v1/campaigns/${campaignId}?holds=false`, trainerToken);
    expect(status.status, status.body).toBe(200);
    expect(
      (JSON.parse(status.body) as { workflow: { step: number } | null }).workflow?.step,
    ).toBeGreaterThanOrEqual(STEPS);

    // Read back from the database (rods' namespace): the aggregator consumed every group the
    // trainer posted, through Kafka over SASL_SSL, into the per-task statistics in PostgreSQL.
    type Stat = { taskId: string; groups: number; rollouts: number; lastStep: number };
    const stats = await waitUntil(
      async () => {
        const s = JSON.parse(await rods(['stats', '--campaign', campaignId, '--json'])) as Stat[];
        return s.reduce((a, x) => a + x.groups, 0) === posted ? s : undefined;
      },
      {
        what: `the statistics to hold the ${posted} groups the trainer posted`,
        timeoutMs: 120_000,
        intervalMs: 500,
      },
    );
    expect(Math.max(...stats.map((s) => s.lastStep))).toBe(STEPS);
    expect(stats.every((s) => s.rollouts >= s.groups)).toBe(true);
    const seeds = new Set(seeded.tasks.map((t) => t.taskId));
    expect(stats.filter((s) => seeds.has(s.taskId)).length).toBeGreaterThan(0);

    // Synthesis ran on rods' machine (the worker, the executor on its loopback, the stand-in
    // generator): seeds were selected and every selected run ended validated or rejected.
    type Status = {
      status: string;
      step: number;
      worker: { present: boolean };
      workflow: { totals: { selected: number; validated: number; rejected: number } };
      holds: {
        lastClosedStep: number;
        lastPlannedStep: number;
        unpublishedBatches: { count: number };
        aggregator: { totalLag: number };
      };
    };
    const campaign = await waitUntil(
      async () => {
        const st = JSON.parse(await rods(['campaign', 'status', campaignId, '--json'])) as Status;
        const t = st.workflow.totals;
        return t.selected > 0 && t.validated + t.rejected >= t.selected ? st : undefined;
      },
      { what: 'the selected syntheses to end validated or rejected', timeoutMs: 180_000, intervalMs: 1000 },
    );
    expect(campaign).toMatchObject({ status: 'running', step: STEPS, worker: { present: true } });
    expect(campaign.holds).toMatchObject({
      lastClosedStep: STEPS,
      lastPlannedStep: STEPS,
      unpublishedBatches: { count: 0 },
      aggregator: { totalLag: 0 },
    });
    const pool = JSON.parse(await rods(['pool', '--campaign', campaignId, '--json'])) as {
      active: number;
      byOrigin: Record<string, number>;
    };
    expect(pool.active).toBe(4 * PER_CATEGORY);
    expect(pool.byOrigin.seed).toBe(4 * PER_CATEGORY);
  }, 600_000);

  it('nothing listens where it was not told to', async () => {
    // Beyond loopback: exactly the authenticating services, each on its namespace's own address.
    const expected: Record<string, string[]> = {
      // PostgreSQL (hostssl only), Kafka (SASL_SSL), nginx in front of Temporal (mutual TLS).
      services: [PORTS.postgres, PORTS.kafka, PORTS.temporal].map(
        (p) => `${lab.addr('services', 'rods')}:${p}`,
      ),
      // The gateway (HTTPS and bearer tokens), on the address facing the trainer only.
      rods: [`${lab.addr('rods', 'trainer')}:${GATEWAY_PORT}`],
      trainer: [],
    };
    for (const [role, want] of Object.entries(expected)) {
      const listening = await lab.listening(role);
      const all = listening.map((l) => l.line).join('\n');
      expect(
        listening.filter((l) => wildcardAddress(l.host)).map((l) => l.line),
        `${lab.ns(role)} listens on every address:\n${all}`,
      ).toEqual([]);
      expect(
        listening
          .filter((l) => !loopbackAddress(l.host))
          .map((l) => `${l.host}:${l.port}`)
          .sort(),
        `${lab.ns(role)} listens beyond loopback:\n${all}`,
      ).toEqual([...want].sort());
    }
    // What stays on loopback does run there: Temporal's dev server behind nginx, the executor.
    const loop = async (role: string) =>
      (await lab.listening(role)).filter((l) => loopbackAddress(l.host)).map((l) => l.port);
    expect(await loop('services')).toContain(PORTS.temporalInternal);
    expect(await loop('rods')).toEqual(expect.arrayContaining([PORTS.executor, STANDIN_PORT]));
  });
});
