// The whole loop as processes, for tests that drive it with a real trainer from outside: the
// stand-in generator (in place of vLLM), a rods worker, aggregator, relay and gateway, each a
// `bin/rods.mjs` process kept by a Supervisor (so a test can kill -9, stop and restart any of
// them), and campaigns created through the gateway, all readable and writable with one
// trainer-scoped token.
import { randomBytes, randomUUID } from 'node:crypto';
import { mkdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { Supervisor } from '../../dev/soak/processes.js';
import { createPool, type Pool } from '../../platform/store/db.js';
import { freePort } from '../../platform/util/free-port.js';
import { waitUntil } from './wait.js';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');

export interface LiveLoop {
  /** Campaign ids by the names given. */
  campaigns: Record<string, string>;
  gatewayUrl: string;
  /** May post to and read these campaigns only. */
  trainerToken: string;
  adminToken: string;
  /** The worker's Temporal task queue (RODS_TASK_QUEUE for a CLI that starts workflows on it). */
  taskQueue: string;
  supervisor: Supervisor;
  db: Pool;
  logDir: string;
  /** The gateway's process name in the supervisor. */
  readonly gateway: 'gateway';
  /** Waits until the gateway answers /healthz again (after a restart). */
  waitGateway(timeoutMs?: number): Promise<void>;
  /**
   * The environment of a Python trainer process reporting to `campaign` through this loop's
   * gateway (rods_client's RodsClient.from_env), its Hugging Face cache in `work`/hf, one thread.
   */
  trainerEnv(campaign: string, work: string): NodeJS.ProcessEnv;
  stop(): Promise<void>;
}

export async function startLiveLoop(opts: {
  name: string;
  /** Campaign config by name (each campaign's id is `<name>-<random>`). */
  campaigns: Record<string, Record<string, unknown>>;
  logDir: string;
  standinArgs?: string[];
}): Promise<LiveLoop> {
  const logDir = path.resolve(opts.logDir);
  mkdirSync(logDir, { recursive: true });
  const suffix = randomUUID().slice(0, 8);
  const campaigns = Object.fromEntries(Object.keys(opts.campaigns).map((n) => [n, `${n}-${suffix}`]));
  const adminToken = randomBytes(16).toString('hex');
  const trainerToken = randomBytes(16).toString('hex');
  const tokensFile = path.join(logDir, 'gateway-tokens');
  const scopes = Object.values(campaigns).map((c) => `campaign:${c}`);
  writeFileSync(tokensFile, `${adminToken} admin\n${trainerToken} ${scopes.join(' ')}\n`, { mode: 0o600 });
  const standinPort = await freePort();
  const gatewayPort = await freePort();
  const taskQueue = `rods-live-${suffix}`;
  const relayName = `live-${suffix}`;
  const supervisor = new Supervisor(ROOT, logDir, {
    RODS_TASK_QUEUE: taskQueue,
    RODS_GATEWAY_TOKENS_FILE: tokensFile,
    RODS_SINK_DIR: path.join(logDir, 'pool-sink'),
    RODS_GENERATOR_BASE_URL: `http://127.0.0.1:${standinPort}/v1`,
  });
  supervisor.start({
    name: 'standin-generator',
    bin: 'rods-dev',
    args: [
      'standin-generator',
      '--port',
      String(standinPort),
      '--seed',
      '1',
      '--quiet',
      ...(opts.standinArgs ?? []),
    ],
  });
  supervisor.start({ name: 'worker', args: ['worker', '--task-queue', taskQueue] });
  supervisor.start({ name: 'aggregator', args: ['aggregator', '--session-timeout-ms', '6000'] });
  supervisor.start({ name: 'relay', args: ['relay', '--name', relayName] });
  supervisor.start({
    name: 'gateway',
    args: ['gateway', '--port', String(gatewayPort), '--task-queue', taskQueue, '--relay-name', relayName],
  });
  const gatewayUrl = `http://127.0.0.1:${gatewayPort}`;
  const answers = async (url: string) => {
    try {
      return (await fetch(url)).ok;
    } catch {
      return false;
    }
  };
  const waitGateway = async (timeoutMs = 60_000) => {
    await waitUntil(() => answers(`${gatewayUrl}/healthz`), {
      what: () => `the gateway at ${gatewayUrl} (log ${logDir}/gateway.log)`,
      timeoutMs,
      intervalMs: 250,
    });
  };
  const db = createPool({ application: `rods-live-loop-${opts.name}`, max: 4 });
  const stop = async () => {
    await supervisor.stopAll();
    await db.end();
  };
  try {
    await waitUntil(() => answers(`http://127.0.0.1:${standinPort}/v1/models`), {
      what: () => `the stand-in generator (log ${logDir}/standin-generator.log)`,
      timeoutMs: 60_000,
      intervalMs: 250,
    });
    await waitGateway();
    for (const [name, campaignId] of Object.entries(campaigns)) {
      const created = await fetch(`${gatewayUrl}/v1/campaigns`, {
        method: 'POST',
        headers: { authorization: `Bearer ${adminToken}`, 'content-type': 'application/json' },
        body: JSON.stringify({ campaignId, config: opts.campaigns[name] }),
      });
      if (created.status !== 201)
        throw new Error(`creating ${campaignId}: ${created.status} ${await created.text()}`);
    }
    for (const campaignId of Object.values(campaigns))
      await waitUntil(
        async () => {
          const r = await fetch(`${gatewayUrl}/v1/campaigns/${campaignId}/pool`, {
            headers: { authorization: `Bearer ${trainerToken}` },
          });
          return r.ok && ((await r.json()) as { tasks: unknown[] }).tasks.length > 0;
        },
        { what: () => `the pool of ${campaignId} to be seeded`, timeoutMs: 120_000, intervalMs: 500 },
      );
  } catch (e) {
    await stop();
    throw e;
  }
  return {
    campaigns,
    gatewayUrl,
    trainerToken,
    adminToken,
    taskQueue,
    supervisor,
    db,
    logDir,
    gateway: 'gateway',
    waitGateway,
    trainerEnv: (campaign, work) => ({
      ...process.env,
      HF_HOME: path.join(work, 'hf'),
      PYTHONUNBUFFERED: '1',
      OMP_NUM_THREADS: '1',
      RODS_GATEWAY_URL: gatewayUrl,
      RODS_TOKEN: trainerToken,
      RODS_CAMPAIGN: campaign,
    }),
    stop,
  };
}
