// `npm run bench -- checkpoints --json [--steps 10000] [--tasks 800] [--early 100] [--campaign ID]
// [--maximal 12] [--probes 16] [--root DIR]`: what recording a checkpoint costs, in two parts.
//
// 1. Latency by age: a campaign of `tasks` tasks trained every step (one group of 16 rollouts per
//    task) for `steps` steps, built through the aggregator's batch path (test/support/checkpoints/
//    history.ts; `--campaign` reuses one built before, extended to `steps` if shorter). A checkpoint
//    of a fresh run at step `early`, then one at the last step, each through the gateway's route;
//    ratio = late ÷ early.
// 2. A gateway process (`rods gateway`, from `--root`'s checkout: point it at another checkout to
//    measure that code) under load: a campaign with `maximal` checkpoints whose bodies are near the
//    8 MiB limit (retrained steps naming 3,000 tasks each), then `probes` concurrent reports of a
//    checkpoint ahead of the closed steps (503), then `probes` concurrent repeats of a maximal one
//    (200). Peak RSS (VmHWM) after each round and the rounds' wall times; mem_ratio = the peak
//    after both rounds ÷ the RSS before them.
import { type ChildProcess, spawn } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { TokenSet } from '../../entry/gateway/auth.js';
import { buildGateway } from '../../entry/gateway/server.js';
import { createPool } from '../../platform/store/db.js';
import { migrate } from '../../platform/store/migrate.js';
import { lastClosedStep } from '../../platform/store/steps/view.js';
import { temporalClient } from '../../platform/temporal/connect.js';
import { freePort } from '../../platform/util/free-port.js';
import { installNodeSha256 } from '../../platform/util/node-sha256.js';
import { CampaignHistory } from '../../test/support/checkpoints/history.js';
import type { BenchResult } from './result.js';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const ROLLOUTS = 16;

/** VmRSS and VmHWM (peak) of a process, in bytes. */
function memory(pid: number): { rss: number; peak: number } {
  const s = readFileSync(`/proc/${pid}/status`, 'utf8');
  const kb = (k: string) => Number(new RegExp(`^${k}:\\s+(\\d+) kB`, 'm').exec(s)?.[1] ?? 0) * 1024;
  return { rss: kb('VmRSS'), peak: kb('VmHWM') };
}

export default async function checkpointsBench(opts: Record<string, string | boolean>): Promise<BenchResult> {
  const num = (k: string, d: number) => {
    const v = opts[k];
    const n = v === undefined || v === true ? d : Number(v);
    if (!Number.isInteger(n) || n < 1) throw new Error(`--${k} must be a positive integer, got ${v}`);
    return n;
  };
  const o = {
    steps: num('steps', 10_000),
    tasks: num('tasks', 800),
    early: num('early', 100),
    maximal: num('maximal', 12),
    probes: num('probes', 16),
    root: typeof opts.root === 'string' ? path.resolve(opts.root) : ROOT,
  };
  const log = (m: string) => opts.json || process.stderr.write(`${m}\n`);
  await migrate();
  installNodeSha256();
  const db = createPool({ application: 'rods-bench-checkpoints', max: 6, limits: { statementTimeoutMs: 0 } });
  const token = randomUUID();
  const { client, close } = await temporalClient();
  const app = buildGateway({
    db,
    temporal: client,
    tokens: new TokenSet([token]),
    taskQueue: 'bench-checkpoints',
  });
  const headers = { authorization: `Bearer ${token}` };
  try {
    // 1. Latency at step `early` and at the last step.
    const tasks = Array.from({ length: o.tasks }, (_, i) => `bench-task-${i}`);
    const reuse = typeof opts.campaign === 'string' ? opts.campaign : undefined;
    const h = new CampaignHistory(db, 'bench-ckpt', reuse);
    const campaignId = h.campaignId;
    if (!reuse) await h.start(tasks);
    const from = reuse ? (await lastClosedStep(db, campaignId)) + 1 : 1;
    const t0 = Date.now();
    for (let s = from; s <= o.steps; s++) {
      await h.step(s, tasks, { rollouts: ROLLOUTS });
      if (s % 500 === 0)
        log(`  ${campaignId}: step ${s}/${o.steps} (${Math.round((Date.now() - t0) / 1000)} s)`);
    }
    const timeCheckpoint = async (step: number) => {
      const started = performance.now();
      const r = await app.inject({
        method: 'POST',
        url: `/v1/campaigns/${campaignId}/checkpoints`,
        headers,
        payload: {
          checkpointId: `bench-${step}-${randomUUID().slice(0, 8)}`,
          runId: `bench-${randomUUID()}`,
          step,
        },
      });
      const ms = performance.now() - started;
      if (r.statusCode !== 201) throw new Error(`checkpoint at step ${step}: ${r.statusCode} ${r.body}`);
      return { ms: Math.round(ms), tasks: (r.json() as { tasks: number }).tasks };
    };
    log(
      `campaign ${campaignId}: ${o.steps} steps; timing checkpoints at steps ${o.early} and ${o.steps} ...`,
    );
    const early = await timeCheckpoint(o.early);
    const late = await timeCheckpoint(o.steps);

    // 2. A gateway process under concurrent reports on a campaign with maximal checkpoints.
    const load = await gatewayUnderLoad(db, o, log);
    return {
      campaign: campaignId,
      steps: o.steps,
      tasks: o.tasks,
      build_seconds: Math.round((Date.now() - t0) / 1000),
      early: { step: o.early, checkpoint_ms: early.ms, manifest_tasks: early.tasks },
      late: { step: o.steps, checkpoint_ms: late.ms, manifest_tasks: late.tasks },
      ratio: Number((late.ms / Math.max(1, early.ms)).toFixed(3)),
      load,
    };
  } finally {
    await app.close();
    await close();
    await db.end();
  }
}

async function gatewayUnderLoad(
  db: ReturnType<typeof createPool>,
  o: { maximal: number; probes: number; root: string },
  log: (m: string) => void,
) {
  const big = Array.from({ length: 3000 }, (_, i) => `big-${i}`);
  const h = await new CampaignHistory(db, 'bench-ckpt-load').start(big);
  const steps = 60;
  for (let s = 1; s <= steps; s++) await h.step(s, big.slice(0, 10));
  const token = randomUUID();
  const port = await freePort();
  const base = `http://127.0.0.1:${port}`;
  const start = async (): Promise<ChildProcess> => {
    const child = spawn(
      process.execPath,
      [
        path.join(o.root, 'bin/rods.mjs'),
        'gateway',
        '--port',
        String(port),
        '--task-queue',
        'bench-ckpt-load',
      ],
      {
        cwd: o.root,
        env: { ...process.env, RODS_GATEWAY_TOKENS: token },
        stdio: ['ignore', 'ignore', 'inherit'],
      },
    );
    for (let i = 0; ; i++) {
      if ((await fetch(`${base}/healthz`).catch(() => null))?.ok) return child;
      if (i > 600) throw new Error('the gateway did not come up');
      await new Promise((r) => setTimeout(r, 100));
    }
  };
  const stop = (c: ChildProcess) =>
    new Promise<void>((r) => {
      c.once('exit', () => r());
      c.kill('SIGTERM');
    });
  let child = await start();
  try {
    const post = (body: unknown) =>
      fetch(`${base}/v1/campaigns/${h.campaignId}/checkpoints`, {
        method: 'POST',
        headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
        body: JSON.stringify(body),
      });
    const retrainedSteps = Array.from({ length: steps }, (_, i) => ({
      step: i + 1,
      groups: big.map((taskId) => ({ taskId, rollouts: ROLLOUTS })),
    }));
    const maximal = (i: number) => ({
      checkpointId: `max-${i}`,
      runId: `run-${i}`,
      step: steps,
      retrainedSteps,
    });
    const bodyBytes = JSON.stringify(maximal(0)).length;
    log(`load: ${o.maximal} checkpoints of ${(bodyBytes / 2 ** 20).toFixed(1)} MiB each ...`);
    for (let i = 0; i < o.maximal; i++) {
      const r = await post(maximal(i));
      if (r.status !== 201) throw new Error(`maximal checkpoint ${i}: ${r.status} ${await r.text()}`);
    }
    // A fresh gateway process for the rounds (its peak is theirs, not the recordings'), warmed by one request.
    await stop(child);
    child = await start();
    const pid = child.pid!;
    await (await post({ checkpointId: 'warm-up', runId: 'r', step: steps + 5 })).arrayBuffer();
    const before = memory(pid);
    const round = async (what: string, body: (i: number) => unknown, want: number) => {
      const t = performance.now();
      const answers = await Promise.all(Array.from({ length: o.probes }, (_, i) => post(body(i))));
      const ms = Math.round(performance.now() - t);
      const statuses = answers.map((a) => a.status);
      await Promise.all(answers.map((a) => a.arrayBuffer()));
      if (statuses.some((s) => s !== want)) throw new Error(`${what}: statuses ${statuses.join(',')}`);
      return { ms, peak_bytes: memory(pid).peak };
    };
    const probes = await round(
      'probes ahead',
      (i) => ({ checkpointId: `ahead-${i}`, runId: 'r', step: steps + 5 }),
      503,
    );
    const repeats = await round('repeats', () => maximal(0), 200);
    const peak = Math.max(probes.peak_bytes, repeats.peak_bytes);
    return {
      maximal_checkpoints: o.maximal,
      maximal_body_bytes: bodyBytes,
      concurrent: o.probes,
      rss_before_bytes: before.rss,
      peak_before_bytes: before.peak,
      probes_ahead_ms: probes.ms,
      repeats_ms: repeats.ms,
      peak_after_bytes: peak,
      mem_ratio: Number((peak / before.rss).toFixed(3)),
    };
  } finally {
    await stop(child);
  }
}
