// `npm run bench -- campaigns --json [--campaigns 20] [--tasks 800] [--steps 15] [--step-seconds 10]
// [--poison 5000] [--alone-only]`: many campaigns on one stack. Each campaign's trainer posts one step (`tasks`
// groups of 16 rewards, closing the step) through the gateway every `step-seconds`, the campaigns'
// posts spread over the period; a step's close latency runs from the start of its POST to the
// moment the aggregator closed it (the steps row's closed_at; each campaign's first step, which
// warms it up, is not counted). First one campaign alone (the
// baseline), then `campaigns` at once, among them one whose trainer stops mid-step (half a step
// posted, never closed) and one whose records are followed by a flood of `poison` undecodable
// ones on its partitions, which the aggregator dead-letters. ratio = the other campaigns' p99 close
// latency ÷ the lone campaign's (also given for p50); the goal is at most 2 for both.
//
// The gateway runs in this process (as its HTTP tests run it, with a worker for its fallback) and
// the aggregator as its own process (`rods aggregator`) on a fresh six-partition topic.
import { type ChildProcess, spawn } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { workflowIds } from '../../domain/ids.js';
import { openKafka } from '../../platform/kafka/client.js';
import { migrate } from '../../platform/store/migrate.js';
import { stepSummaries } from '../../platform/store/steps/view.js';
import { freePort } from '../../platform/util/free-port.js';
import { installNodeSha256 } from '../../platform/util/node-sha256.js';
import { startGatewayWithWorker } from '../../test/support/gateway/gateway-with-worker.js';
import type { BenchResult } from './result.js';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const ROLLOUTS = 16;

function pct(xs: number[], p: number): number {
  if (xs.length === 0) return 0;
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.max(0, Math.ceil((p / 100) * s.length) - 1))]!;
}

export default async function campaignsBench(opts: Record<string, string | boolean>): Promise<BenchResult> {
  const num = (k: string, d: number) => {
    const v = opts[k];
    const n = v === undefined || v === true ? d : Number(v);
    if (!Number.isFinite(n) || n < 0) throw new Error(`--${k} must be a non-negative number, got ${v}`);
    return n;
  };
  const o = {
    campaigns: Math.max(3, num('campaigns', 20)),
    tasks: num('tasks', 800),
    steps: num('steps', 15),
    stepSeconds: num('step-seconds', 10),
    poison: num('poison', 5000),
    // Only the lone campaign (the secured bench runs it on each stack); its POSTs' times too.
    aloneOnly: opts['alone-only'] === true,
  };
  const log = (m: string) => opts.json || process.stderr.write(`${m}\n`);
  await migrate();
  installNodeSha256();
  const token = randomUUID();
  const gw = await startGatewayWithWorker({
    application: 'rods-bench-campaigns',
    tokens: [token],
    // Under rods' own prefixes: on a secured stack its principal may use nothing else (ACLs).
    name: 'rods.bench-campaigns',
    partitions: 6,
    tlsFromEnv: true,
  });
  const headers = { authorization: `Bearer ${token}`, 'content-type': 'application/json' };
  const run = randomUUID().slice(0, 6);
  const ids: string[] = [];
  let aggregator: ChildProcess | undefined;
  let stderr = '';
  try {
    const metricsPort = await freePort();
    aggregator = spawn(
      process.execPath,
      [
        path.join(ROOT, 'bin/rods.mjs'),
        'aggregator',
        '--group',
        `rods-bench-campaigns-${run}`,
        '--topic',
        gw.topic,
        '--metrics-port',
        String(metricsPort),
      ],
      { cwd: ROOT, env: { ...process.env, RODS_LOG_LEVEL: 'warn' }, stdio: ['ignore', 'ignore', 'pipe'] },
    );
    aggregator.stderr!.on('data', (d) => {
      stderr = (stderr + d).slice(-4000);
    });

    const create = async (campaignId: string) => {
      ids.push(campaignId);
      const r = await fetch(`${gw.base}/v1/campaigns`, {
        method: 'POST',
        headers,
        // Tasks named by the bench, not drawn from a pool: accepted without the pool check. No
        // synthesis (no generator runs here): the campaign workflows plan each step and select nothing.
        body: JSON.stringify({
          campaignId,
          config: {
            seeds: { perCategory: 1 },
            ingestion: { unknownTasks: 'accept' },
            selection: { budgetPerStep: 0, perCategoryQuota: {} },
          },
        }),
      });
      if (r.status !== 201) throw new Error(`campaign ${campaignId}: ${r.status} ${await r.text()}`);
    };
    /** Each POST's time to its 202 (validated, claim-checked, published), in ms. */
    const postMs: number[] = [];
    const post = async (campaignId: string, step: number, groups: number, close: boolean) => {
      const t0 = performance.now();
      const body = {
        batchId: `b${step}-${close ? 'c' : 'h'}`,
        policyVersion: `p${step}`,
        close,
        groups: Array.from({ length: groups }, (_, t) => ({
          taskId: `task-${t}`,
          rewards: Array.from({ length: ROLLOUTS }, (_, i) => ((step * 31 + t * 7 + i) % 17) / 16),
        })),
      };
      const r = await fetch(`${gw.base}/v1/campaigns/${campaignId}/steps/${step}/rollouts`, {
        method: 'POST',
        headers,
        body: JSON.stringify(body),
      });
      if (r.status !== 202) throw new Error(`${campaignId} step ${step}: ${r.status} ${await r.text()}`);
      if (step > 1) postMs.push(performance.now() - t0);
    };

    /**
     * Drives `campaigns` for `o.steps` steps, each posting a step every period at its own offset;
     * returns each step's start (ms since the epoch) per campaign. `special` is called once at
     * the middle of the run.
     */
    const drive = async (campaigns: string[], special?: () => Promise<void>) => {
      const starts = new Map<string, number[]>(campaigns.map((c) => [c, []]));
      const t0 = Date.now() + 500;
      const period = o.stepSeconds * 1000;
      const posts: Promise<void>[] = [];
      let specialDone: Promise<void> | undefined;
      for (let step = 1; step <= o.steps; step++) {
        for (const [i, c] of campaigns.entries()) {
          const at = t0 + (step - 1) * period + (i * period) / campaigns.length;
          posts.push(
            (async () => {
              await new Promise((r) => setTimeout(r, Math.max(0, at - Date.now())));
              starts.get(c)![step - 1] = Date.now();
              await post(c, step, o.tasks, true);
            })(),
          );
        }
        if (special && step === Math.ceil(o.steps / 2))
          specialDone = (async () => {
            await new Promise((r) => setTimeout(r, Math.max(0, t0 + (step - 1) * period - Date.now())));
            await special();
          })();
      }
      await Promise.all(posts);
      await specialDone;
      return starts;
    };

    /** Each step's close latency (closed_at − POST start), waiting for the steps to close. */
    const latencies = async (starts: Map<string, number[]>) => {
      const out: number[] = [];
      const perCampaign: Record<string, number> = {};
      for (const [c, s] of starts) {
        const deadline = Date.now() + 120_000;
        let rows = await stepSummaries(gw.db, c);
        while (rows.filter((r) => r.closedAt).length < o.steps) {
          if (Date.now() > deadline || aggregator?.exitCode !== null)
            throw new Error(`${c}: ${rows.length} of ${o.steps} steps closed (aggregator: ${stderr})`);
          await new Promise((r) => setTimeout(r, 200));
          rows = await stepSummaries(gw.db, c);
        }
        // Step 1 warms a campaign up (its first batch, the aggregator's first fetch): not counted.
        const mine = rows.filter((r) => r.step > 1).map((r) => r.closedAt!.getTime() - s[r.step - 1]!);
        out.push(...mine);
        perCampaign[c] = Math.round(pct(mine, 50));
      }
      return { all: out, perCampaign };
    };

    // 1. One campaign alone.
    const lone = `bench-c-${run}-alone`;
    await create(lone);
    log(`one campaign alone: ${o.steps} steps of ${o.tasks} tasks, one every ${o.stepSeconds} s`);
    const alone = await latencies(await drive([lone]));
    if (o.aloneOnly)
      return {
        tasks: o.tasks,
        steps: o.steps,
        step_seconds: o.stepSeconds,
        gateway: gw.base.startsWith('https:') ? 'https' : 'http',
        alone: {
          p50_close_ms: Math.round(pct(alone.all, 50)),
          p99_close_ms: Math.round(pct(alone.all, 99)),
          p50_post_ms: Math.round(pct(postMs, 50)),
          p99_post_ms: Math.round(pct(postMs, 99)),
        },
        ratio: 1,
      };

    // 2. Many at once: one stalls mid-step, one is followed by a poison flood.
    const many = Array.from({ length: o.campaigns }, (_, i) => `bench-c-${run}-${i}`);
    for (const c of many) await create(c);
    const [stalled, poisoned, ...others] = many;
    log(
      `${o.campaigns} campaigns at once (${stalled} stalls mid-step, ${poisoned} gets ${o.poison} poison records)`,
    );
    const producer = await openKafka({ clientId: 'bench-campaigns-poison' }).producer({ idempotent: true });
    let stalledAt = 0;
    const starts = await drive([poisoned!, ...others], async () => {
      // The stalled trainer: half a step, never its closing batch.
      stalledAt = Math.ceil(o.steps / 2);
      await post(stalled!, stalledAt, Math.floor(o.tasks / 2), false);
      // The flood: undecodable records keyed like the poisoned campaign's tasks (so on the same
      // partitions as its groups), which every aggregator batch meets and dead-letters.
      for (let i = 0; i < o.poison; i += 1000)
        await producer.send(
          gw.topic,
          Array.from({ length: Math.min(1000, o.poison - i) }, (_, j) => ({
            key: `task-${(i + j) % o.tasks}`,
            value: Buffer.from(`poison ${poisoned} ${i + j}: not an Avro record`),
          })),
        );
    });
    await producer.disconnect();
    const together = await latencies(new Map([...starts].filter(([c]) => c !== poisoned)));
    const poisonedLatency = await latencies(new Map([[poisoned!, starts.get(poisoned!)!]]));
    const stalledRows = await stepSummaries(gw.db, stalled!);
    // The flood reached the aggregator: its dead letters (undecodable records) are counted.
    const metrics = await (await fetch(`http://127.0.0.1:${metricsPort}/metrics`)).text();
    const deadLettered = [...metrics.matchAll(/^rods_aggregator_dlq_total\{[^}]*\} (\d+)/gm)].reduce(
      (a, m) => a + Number(m[1]),
      0,
    );

    const ms = (x: number) => Math.round(x);
    const p50 = { alone: pct(alone.all, 50), together: pct(together.all, 50) };
    const p99 = { alone: pct(alone.all, 99), together: pct(together.all, 99) };
    return {
      campaigns: o.campaigns,
      tasks: o.tasks,
      steps: o.steps,
      step_seconds: o.stepSeconds,
      groups_per_s_offered: Math.round((o.campaigns * o.tasks) / o.stepSeconds),
      alone: { p50_close_ms: ms(p50.alone), p99_close_ms: ms(p99.alone) },
      together: {
        p50_close_ms: ms(p50.together),
        p99_close_ms: ms(p99.together),
        steps: together.all.length,
        worst_campaign_p50_ms: Math.max(...Object.values(together.perCampaign)),
      },
      poisoned: {
        records: o.poison,
        dead_lettered: deadLettered,
        p50_close_ms: ms(pct(poisonedLatency.all, 50)),
        steps_closed: poisonedLatency.all.length,
      },
      stalled: { step: stalledAt, steps_closed: stalledRows.filter((r) => r.closedAt).length },
      p50_ratio: Number((p50.together / p50.alone).toFixed(3)),
      ratio: Number((p99.together / p99.alone).toFixed(3)),
    };
  } finally {
    if (aggregator && aggregator.exitCode === null) {
      aggregator.kill('SIGTERM');
      await new Promise((r) => aggregator!.once('exit', r));
    }
    await gw.close(ids.map((c) => workflowIds.campaign(c)));
  }
}
