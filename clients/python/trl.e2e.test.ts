// TRL's real GRPOTrainer (trl 1.16 on torch, CPU) training on a rods campaign's live pool through
// rods_client.trl, against the real gateway, worker, aggregator and relay as processes and the
// stand-in generator: a tiny randomly initialised Qwen2 and a tokenizer trained on the pool's text
// (clients/python/rods_client/tiny.py), nothing downloaded. The trainer script is
// clients/python/tests/trl/train.py; its venv is the cached TRL one (clients/python/venv.ts).
import { type ChildProcess, spawn } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { mkdirSync, readFileSync, rmSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { paths } from '../../infra/stack/paths.js';
import { type LiveLoop, startLiveLoop } from '../../test/support/live-loop.js';
import { installVenv } from '../../test/support/python/venv.js';
import {
  expectCountedOnce,
  expectStepsClosedInOrder,
  injections,
  LIVE_CAMPAIGN,
} from '../../test/support/trainer-checks.js';
import { waitUntil } from '../../test/support/wait.js';

const G = LIVE_CAMPAIGN.rolloutsPerTask; // num_generations in train.py
const CONFIG = LIVE_CAMPAIGN;
const SCRIPT = fileURLToPath(new URL('./tests/trl/train.py', import.meta.url));
const EXAMPLE = fileURLToPath(new URL('./examples/trl_grpo.py', import.meta.url));

let python: string;
let loop: LiveLoop;
let work: string;
let tinyModel: string;

interface StepLine {
  step: number;
  groups: number;
  rewards: number;
  spooled: boolean;
  poolVersions: number[];
  t: number;
}

class Trainer {
  readonly steps: StepLine[] = [];
  summary: { seconds: number; steps: number; timings: Record<string, unknown> } | undefined;
  private out = '';
  readonly exited: Promise<{ code: number | null; signal: string | null }>;
  readonly child: ChildProcess;

  constructor(
    campaign: string,
    name: string,
    env: Record<string, string>,
    opts: { processes?: number; script?: string; args?: string[] } = {},
  ) {
    const outputDir = path.join(work, name);
    const script = opts.script ?? SCRIPT;
    const args =
      opts.args ??
      ((opts.processes ?? 1) > 1
        ? ['-m', 'torch.distributed.run', '--standalone', '--nproc_per_node', String(opts.processes), script]
        : [script]);
    this.child = spawn(python, args, {
      cwd: work,
      env: {
        ...process.env,
        HF_HOME: path.join(work, 'hf'),
        PYTHONUNBUFFERED: '1',
        OMP_NUM_THREADS: '1',
        RODS_GATEWAY_URL: loop.gatewayUrl,
        RODS_TOKEN: loop.trainerToken,
        RODS_CAMPAIGN: campaign,
        RODS_MODEL: tinyModel,
        RODS_OUTPUT_DIR: outputDir,
        ...env,
      },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    const take = (chunk: Buffer) => {
      this.out = (this.out + chunk.toString()).slice(-200_000);
      for (const m of chunk.toString().matchAll(/rods-(step|summary) (\{.*\})/g)) {
        const value = JSON.parse(m[2]!);
        if (m[1] === 'step') this.steps.push(value as StepLine);
        else this.summary = value;
      }
    };
    this.child.stdout!.on('data', take);
    this.child.stderr!.on('data', take);
    this.exited = new Promise((resolve) =>
      this.child.once('exit', (code, signal) => resolve({ code, signal })),
    );
  }

  get log(): string {
    return this.out.slice(-6000);
  }

  async finished(): Promise<void> {
    const r = await this.exited;
    if (r.code !== 0) throw new Error(`the trainer exited with ${r.code ?? r.signal}:\n${this.log}`);
  }

  waitStep(step: number, timeoutMs = 300_000) {
    return waitUntil(() => this.steps.some((s) => s.step >= step) || this.child.exitCode !== null, {
      what: () => `the trainer to report step ${step}:\n${this.log}`,
      timeoutMs,
      intervalMs: 100,
    });
  }
}

beforeAll(async () => {
  python = await installVenv('trl');
  work = path.join(paths.stack, 'tests', `trl-${randomUUID().slice(0, 8)}`);
  mkdirSync(work, { recursive: true });
  loop = await startLiveLoop({
    name: 'trl',
    campaigns: { live: CONFIG, ranks: CONFIG, resume: CONFIG, example: CONFIG },
    logDir: path.join(work, 'logs'),
  });
  // One tiny model for every run, its tokenizer trained on a pool's tasks and bfcl's function docs.
  tinyModel = path.join(work, 'tiny-model');
  const build = new Trainer(
    loop.campaigns.live!,
    'build',
    {
      RODS_PY: [
        'from rods_client import RodsClient',
        'from rods_client.tiny import build_tiny_model, pool_texts',
        `build_tiny_model(${JSON.stringify(tinyModel)}, pool_texts(RodsClient.from_env().fetch_pool()))`,
      ].join('\n'),
    },
    { args: ['-c', 'import os; exec(os.environ["RODS_PY"])'] },
  );
  await build.finished();
}, 1_800_000);

afterAll(async () => {
  await loop?.stop();
  if (work && process.env.RODS_KEEP_TEST_OUTPUT !== '1') rmSync(work, { recursive: true, force: true });
});

describe('TRL GRPOTrainer on the live pool (real trl, torch on CPU)', () => {
  it('trains on tasks injected mid-run, closes every step in order with G rewards a task, and rides out a 60 s gateway outage', async () => {
    const campaign = loop.campaigns.live!;
    const trainer = new Trainer(campaign, 'live', { RODS_MAX_STEPS: '150', RODS_STEP_SLEEP: '0.25' });
    // An injected task drawn and rewarded after its injection step...
    const drawn = await waitUntil(
      async () => {
        if (trainer.child.exitCode !== null) throw new Error(`the trainer exited:\n${trainer.log}`);
        return (await injections(loop.db, campaign)).find((r) => r.first !== null);
      },
      { what: () => `an injected task drawn by TRL:\n${trainer.log}`, timeoutMs: 600_000, intervalMs: 1000 },
    );
    // ...then the gateway stopped for 60 s while TRL trains on.
    const down = trainer.steps.at(-1)!.step;
    await loop.supervisor.kill9(loop.gateway);
    const stoppedAt = Date.now();
    await new Promise((r) => setTimeout(r, 60_000));
    const duringOutage = trainer.steps.filter((s) => s.t * 1000 > stoppedAt).length;
    loop.supervisor.restart(loop.gateway);
    await loop.waitGateway();
    await trainer.finished();
    const last = trainer.summary!.steps;
    console.log(
      `[trl live] ${last} steps in ${trainer.summary!.seconds.toFixed(1)} s; first injected task drawn: ${JSON.stringify(drawn)}; ` +
        `${duringOutage} steps trained while the gateway was down (from step ${down}); timings ${JSON.stringify(trainer.summary!.timings)}`,
    );
    expect(duringOutage).toBeGreaterThan(5);
    expect(drawn.first!).toBeGreaterThan(drawn.step);

    await expectStepsClosedInOrder(loop.db, campaign, last);
    const accepted = await expectCountedOnce(loop.db, campaign);
    // G rewards per task and step, every step one batch (none lost to the outage, none twice).
    expect(accepted.every((g) => g.n === G)).toBe(true);
    expect(new Set(accepted.map((g) => g.batch_id)).size).toBe(last);
    const perStep = new Map<number, number>();
    for (const g of accepted) perStep.set(g.step, (perStep.get(g.step) ?? 0) + 1);
    for (let s = 1; s <= last; s++) expect(perStep.get(s), `groups of step ${s}`).toBe(2);
    const timings = trainer.summary!.timings as { reports: Record<string, number> };
    expect(timings.reports.retries).toBeGreaterThan(0);
    expect(timings.reports.rejected).toBe(0);
  }, 1_200_000);

  it('with two processes (torch.distributed.run, gloo): rewards gathered from both ranks and reported once a step, the same pool version on both ranks', async () => {
    const campaign = loop.campaigns.ranks!;
    // 6 completions a rank and G = 4: a prompt's group is split across the two ranks, so only
    // the gather makes it whole (3 prompts a step, 12 rewards).
    const trainer = new Trainer(
      campaign,
      'ranks',
      { RODS_MAX_STEPS: '40', RODS_BATCH: '6' },
      { processes: 2 },
    );
    await trainer.finished();
    const last = trainer.summary!.steps;
    expect(last).toBe(40);
    await expectStepsClosedInOrder(loop.db, campaign, last);
    const accepted = await expectCountedOnce(loop.db, campaign);
    expect(accepted.every((g) => g.n === G)).toBe(true);
    const perStep = new Map<number, number>();
    for (const g of accepted) perStep.set(g.step, (perStep.get(g.step) ?? 0) + 1);
    for (let s = 1; s <= last; s++) expect(perStep.get(s), `groups of step ${s}`).toBe(3);
    // One report a step, from rank 0: 40 batches, none a conflict.
    expect(new Set(accepted.map((g) => g.batch_id)).size).toBe(last);
    const ranks = [0, 1].map(
      (r) =>
        JSON.parse(readFileSync(path.join(work, 'ranks', `rods-pool-rank${r}.json`), 'utf8')) as {
          batchVersions: number[];
        },
    );
    expect(ranks[0]!.batchVersions.length).toBeGreaterThanOrEqual(last);
    expect(ranks[1]!.batchVersions).toEqual(ranks[0]!.batchVersions);
    const injected = await injections(loop.db, campaign);
    const drawn = injected.filter((r) => r.first !== null);
    console.log(
      `[trl ranks] ${last} steps in ${trainer.summary!.seconds.toFixed(1)} s on 2 processes; pool versions by batch ${JSON.stringify(ranks[0]!.batchVersions)}; ` +
        `injected ${injected.length}, drawn after injection ${JSON.stringify(drawn.slice(0, 5))}; timings ${JSON.stringify(trainer.summary!.timings)}`,
    );
    expect(new Set(ranks[0]!.batchVersions).size).toBeGreaterThan(1);
    expect(drawn.length).toBeGreaterThan(0);
    for (const d of drawn) expect(d.first!).toBeGreaterThan(d.step);
  }, 900_000);

  it('a kill -9 of the training process and a resume from its last checkpoint: no step lost or counted twice', async () => {
    const campaign = loop.campaigns.resume!;
    const env = { RODS_MAX_STEPS: '24', RODS_SAVE_STEPS: '5', RODS_STEP_SLEEP: '0.2' };
    const first = new Trainer(campaign, 'resume', env);
    await first.waitStep(13);
    first.child.kill('SIGKILL');
    await first.exited;
    const before = first.steps.at(-1)!.step;
    // Killed after step 13 or later: the last checkpoint is step 10 (or 15), so steps after it
    // are trained again, and the reports of those already spooled must not be sent twice.
    const second = new Trainer(campaign, 'resume', { ...env, RODS_RESUME: '1' });
    await second.finished();
    const skipped = (second.summary!.timings as { reports: Record<string, number> }).reports;
    const resumedFrom = second.steps[0]?.step;
    console.log(
      `[trl resume] killed after step ${before}; the resumed run's first step ${resumedFrom}; its reporter ${JSON.stringify(skipped)}`,
    );
    expect(resumedFrom).toBeDefined();
    expect(resumedFrom!).toBeLessThanOrEqual(before);
    expect(skipped.skipped).toBeGreaterThan(0);
    expect(skipped.conflicts).toBe(0);
    await expectStepsClosedInOrder(loop.db, campaign, 24);
    const accepted = await expectCountedOnce(loop.db, campaign);
    const batches = new Map<number, Set<string>>();
    for (const g of accepted) batches.set(g.step, (batches.get(g.step) ?? new Set()).add(g.batch_id));
    for (let s = 1; s <= 24; s++)
      expect([...(batches.get(s) ?? [])], `batches of step ${s}`).toEqual([`step-${s}`]);
    expect(accepted.every((g) => g.n === G)).toBe(true);
  }, 900_000);

  it('the BFCL environment, called as TRL calls it (pytest clients/python/tests/trl in the TRL venv)', async () => {
    const tests = fileURLToPath(new URL('./tests/trl', import.meta.url));
    const run = new Trainer(
      loop.campaigns.example!,
      'pytest-bfcl',
      {},
      {
        args: ['-m', 'pytest', tests, '-q', '-p', 'no:cacheprovider', '-rA'],
      },
    );
    await run.finished();
    const summary = run.log.match(/^(\d+) passed in .*$/m);
    expect(summary, run.log).not.toBeNull();
    console.log(`[pytest clients/python/tests/trl] ${summary![0]}`);
    for (const name of [
      'test_ground_truth_scores_full_progress_and_a_skipped_turn_loses_it[miss_func]',
      'test_a_withheld_function_answers_not_available_until_its_turn',
      'test_every_tool_renders_as_bfcls_document',
    ])
      expect(
        run.log
          .split('\n')
          .some((l) => l.startsWith('PASSED ') && l.endsWith(`test_bfcl_environment.py::${name}`)),
      ).toBe(true);
  }, 600_000);

  it('the TRL example runs as it is (BFCL environments as tools, the progress reward)', async () => {
    const campaign = loop.campaigns.example!;
    const trainer = new Trainer(campaign, 'example', { RODS_MAX_STEPS: '2' }, { script: EXAMPLE });
    await trainer.finished();
    await expectStepsClosedInOrder(loop.db, campaign, 2);
    const accepted = await expectCountedOnce(loop.db, campaign);
    // 4 prompts a rank... one process: per_device_train_batch_size 4 / num_generations 4 = 1 task a step.
    expect(accepted.map((g) => [g.step, g.n])).toEqual([
      [1, 4],
      [2, 4],
    ]);
    const timings = JSON.parse(readFileSync(path.join(work, 'example', 'rods-timings.json'), 'utf8')) as {
      reports: Record<string, number>;
    };
    expect(timings.reports).toMatchObject({ sent: 2, rejected: 0 });
  }, 600_000);
});
