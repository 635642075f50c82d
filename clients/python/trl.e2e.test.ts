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
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { paths } from '../../infra/stack/paths.js';
import { createPool, inTransaction } from '../../platform/store/db.js';
import { rodsJson } from '../../test/support/cli.js';
import { type LiveLoop, startLiveLoop } from '../../test/support/live-loop.js';
import { installVenv } from '../../test/support/python/venv.js';
import {
  expectCountedOnce,
  expectStepsClosedInOrder,
  injections,
  LIVE_CAMPAIGN,
} from '../../test/support/trainer-checks.js';
import { waitUntil } from '../../test/support/wait.js';

const rods = (args: string[]) => rodsJson(args);

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
  summary: { seconds: number; steps: number; timings: Record<string, unknown>; runId?: string } | undefined;
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
        ...loop.trainerEnv(campaign, work),
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
    campaigns: {
      live: CONFIG,
      ranks: CONFIG,
      resume: CONFIG,
      example: CONFIG,
      evaluation: CONFIG,
      // Base seeds only: the scripted policy finds a task by its first user turn, which a miss_func
      // or long_context seed shares with its base task.
      tools: { ...CONFIG, seeds: { perCategory: 3, categories: ['base'] } },
    },
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
    // 100 steps: closing a step past 100 empties the claim checks 100 steps back (their rewards are
    // counted and on the topic), and the count check below reads what the gateway accepted from them.
    const trainer = new Trainer(campaign, 'live', { RODS_MAX_STEPS: '100', RODS_STEP_SLEEP: '0.25' });
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
    // Until 15 steps after the ranks first drew from an injected pool version: when that comes
    // depends on the machine's load (at 40 fixed steps a busy CI machine saw none, 2026-12-04).
    const trainer = new Trainer(
      campaign,
      'ranks',
      { RODS_MAX_STEPS: '400', RODS_BATCH: '6', RODS_STOP_AFTER_NEW_POOL: '15' },
      { processes: 2 },
    );
    await trainer.finished();
    const last = trainer.summary!.steps;
    expect(last, 'no injected pool version reached the ranks in 400 steps').toBeLessThan(400);
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

  it("a kill -9 of the training process and a resume from an earlier checkpoint: no step lost or counted twice, each checkpoint's manifest says what it was trained on, and the diff names the replayed steps", async () => {
    const campaign = loop.campaigns.resume!;
    const env = { RODS_MAX_STEPS: '24', RODS_SAVE_STEPS: '5', RODS_STEP_SLEEP: '0.2' };
    const first = new Trainer(campaign, 'resume', env);
    await first.waitStep(12);
    first.child.kill('SIGKILL');
    await first.exited;
    const before = first.steps.at(-1)!.step;
    // Resumed from checkpoint 5 on purpose, not from the last one (10): steps 6..12 and later ones
    // the first run reported are trained again, and their reports must not be sent twice.
    const second = new Trainer(campaign, 'resume', { ...env, RODS_RESUME_FROM: '5' });
    await second.finished();
    const skipped = (second.summary!.timings as { reports: Record<string, number> }).reports;
    const resumedFrom = second.steps[0]?.step;
    console.log(
      `[trl resume] killed after step ${before}; the resumed run's first step ${resumedFrom}; its reporter ${JSON.stringify(skipped)}`,
    );
    expect(resumedFrom).toBe(6);
    expect(skipped.skipped).toBeGreaterThanOrEqual(before - 5);
    expect(skipped.conflicts).toBe(0);
    await expectStepsClosedInOrder(loop.db, campaign, 24);
    const accepted = await expectCountedOnce(loop.db, campaign);
    const batches = new Map<number, Set<string>>();
    for (const g of accepted) batches.set(g.step, (batches.get(g.step) ?? new Set()).add(g.batch_id));
    for (let s = 1; s <= 24; s++)
      expect([...(batches.get(s) ?? [])], `batches of step ${s}`).toEqual([`step-${s}`]);
    expect(accepted.every((g) => g.n === G)).toBe(true);

    // The checkpoints: the first run's at 5 and 10 (sent by the second run's reporter when the
    // kill left them in the spool), the second run's at 10, 15, 20 and 24, resumed from the first's 5.
    const run2 = second.summary!.runId as string;
    type Listed = { checkpointId: string; runId: string; trainerStep: number; resumedFrom: string | null };
    const list = (await rods(['manifest', 'list', '--campaign', campaign, '--json'])).json as Listed[];
    const r1 = list.filter((c) => c.resumedFrom === null);
    const r2 = list.filter((c) => c.runId === run2);
    expect(r1.map((c) => c.trainerStep).slice(0, 2)).toEqual([5, 10]);
    expect(new Set(r1.map((c) => c.runId)).size).toBe(1);
    // (transformers saves at the last step too: trainer_callback.py:602-604)
    expect(r2.map((c) => c.trainerStep)).toEqual([10, 15, 20, 24]);
    const at = (cs: Listed[], step: number) => cs.find((c) => c.trainerStep === step)!.checkpointId;
    for (const c of r2) expect(c.resumedFrom).toBe(at(r1, 5));

    type Shown = {
      verified: boolean;
      recorded: { digest: string | null };
      chain: { runId: string; from: number; to: number }[];
      steps: { step: number; runId: string; source: string; tasks: { taskId: string; rollouts: number }[] }[];
      entries: { taskId: string; lineageRoot: string; steps: number[] }[];
    };
    const show = async (id: string) =>
      (await rods(['manifest', '--campaign', campaign, '--checkpoint', id, '--json'])).json as Shown;
    const m15 = await show(at(r1, 5));
    const m110 = await show(at(r1, 10));
    const m210 = await show(at(r2, 10));
    const m215 = await show(at(r2, 15));
    for (const m of [m15, m110, m210, m215]) {
      expect(m.verified).toBe(true);
      expect(m.recorded.digest).toMatch(/^sha256:[0-9a-f]{64}$/);
    }
    // What the first run's checkpoint 10 holds is what the gateway accepted for steps 1..10.
    const acceptedAt = (s: number) =>
      accepted
        .filter((g) => g.step === s)
        .map((g) => g.task_id)
        .sort();
    expect(m110.steps.map((s) => s.step)).toEqual(Array.from({ length: 10 }, (_, i) => i + 1));
    for (const s of m110.steps) {
      expect(s.tasks.map((t) => t.taskId).sort(), `tasks of step ${s.step}`).toEqual(acceptedAt(s.step));
      expect(s.tasks.every((t) => t.rollouts === G)).toBe(true);
    }
    // The second run's checkpoint 10: steps 1..5 from the first run, 6..10 as the second trained them.
    expect(m210.chain).toEqual([
      { runId: r1[0]!.runId, checkpointId: at(r1, 5), from: 0, to: 5 },
      { runId: run2, checkpointId: at(r2, 10), from: 5, to: 10 },
    ]);
    expect(m210.steps.map((s) => [s.step, s.runId, s.source])).toEqual([
      ...[1, 2, 3, 4, 5].map((s) => [s, r1[0]!.runId, 'reported']),
      ...[6, 7, 8, 9, 10].map((s) => [s, run2, 'retrained']),
    ]);
    for (const s of m210.steps) expect(s.tasks.map((t) => t.rollouts)).toEqual([G, G]);
    // Consistent before and after the resume: a later checkpoint extends an earlier one of its chain.
    expect(m210.steps.slice(0, 5)).toEqual(m15.steps);
    expect(m215.steps.slice(0, 10)).toEqual(m210.steps);
    // Steps 11 and 12 the first run had reported too: trained again; 13.. reported by the second run.
    // (the kill may land between a step's spool write and its log line: one more than `before`).
    const again = m215.steps.filter((s) => s.source === 'retrained').map((s) => s.step);
    expect(again).toEqual(Array.from({ length: again.length }, (_, i) => i + 6));
    expect(again.at(-1)!).toBeGreaterThanOrEqual(Math.min(before, 15));
    for (const e of m215.entries) expect(e.lineageRoot).toMatch(/^multi_turn_/);

    // The diff names the replayed steps: both checkpoints at step 10 hold steps 6..10, from two runs.
    const diff = (await rods(['manifest', 'diff', at(r1, 10), at(r2, 10), '--campaign', campaign, '--json']))
      .json as {
      steps: { step: number; status: string; a: { runId: string }; b: { runId: string } }[];
      counts: Record<string, number>;
    };
    expect(diff.steps.map((s) => [s.step, s.status])).toEqual([6, 7, 8, 9, 10].map((s) => [s, 'replayed']));
    expect(diff.steps[0]).toMatchObject({ a: { runId: r1[0]!.runId }, b: { runId: run2 } });
    expect(diff.counts).toMatchObject({ same: 5, replayed: 5 });
    const later = (await rods(['manifest', 'diff', at(r2, 10), at(r2, 15), '--campaign', campaign, '--json']))
      .json as { steps: { step: number; status: string }[] };
    expect(later.steps.map((s) => [s.step, s.status])).toEqual(
      [11, 12, 13, 14, 15].map((s) => [s, 'only-b']),
    );
    console.log(
      `[trl resume] checkpoints ${JSON.stringify(list.map((c) => [c.checkpointId, c.trainerStep, c.resumedFrom]))}; ` +
        `manifest of ${at(r2, 15)}: ${m215.entries.length} tasks over ${m215.steps.length} steps; diff ${at(r1, 10)} ${at(r2, 10)}: ${JSON.stringify(diff.counts)}`,
    );

    // rods audit verify recomputes every manifest, and fails when a manifested task's content is altered.
    const scope = ['audit', 'verify', '--prefix', `checkpoints-${campaign}`, '--no-anchor', '--json'];
    const clean = await rods(scope);
    expect(clean.code).toBe(0);
    expect((clean.json as { manifests: { ok: boolean }[] }).manifests).toHaveLength(list.length);
    const seed = m15.entries[0]!.taskId;
    const original = await loop.db.query<{ position: string; task: string }>(
      `select position::text, payload->>'task' as task from events
        where type in ('TaskSeeded', 'TaskInjected') and payload->>'campaignId' = $1 and payload->>'taskId' = $2`,
      [campaign, seed],
    );
    // The owner of the tables plays the attacker: only it can switch the append-only trigger's bypass on.
    const endpoints = inject('endpoints');
    const owner = createPool({
      connectionString: endpoints.ownerDatabaseUrl ?? endpoints.databaseUrl,
      application: 'rods-test-trl-owner',
      max: 1,
    });
    const alter = (task: string) =>
      inTransaction(owner, async (c) => {
        await c.query("set local rods.allow_event_mutation = 'on'");
        await c.query(
          `update events set payload = jsonb_set(payload, '{task}', to_jsonb($2::text)) where position = $1`,
          [original.rows[0]!.position, task],
        );
      });
    const edited = JSON.parse(original.rows[0]!.task) as { question: { content: string }[][] };
    edited.question[0]![0]!.content += ' (edited)';
    await alter(JSON.stringify(edited));
    try {
      const tampered = await rods(scope);
      expect(tampered.code).toBe(1);
      const failed = (
        tampered.json as { manifests: { checkpointId: string; ok: boolean; problem?: string }[] }
      ).manifests.filter((m) => !m.ok);
      expect(failed.map((m) => m.checkpointId)).toContain(at(r1, 5));
      expect(failed[0]!.problem).toMatch(/differs from the one recorded/);
    } finally {
      await alter(original.rows[0]!.task);
      await owner.end();
    }
    expect((await rods(scope)).code).toBe(0);
  }, 900_000);

  it('an evaluation pass every 2 steps and an async reward function: evaluation rewards are never a step, every training step is closed once', async () => {
    const campaign = loop.campaigns.evaluation!;
    const trainer = new Trainer(campaign, 'evaluation', {
      RODS_MAX_STEPS: '6',
      RODS_EVAL_STEPS: '2',
      RODS_ASYNC_REWARD: '1',
      RODS_STEP_SLEEP: '0.05',
    });
    await trainer.finished();
    const summary = trainer.summary as unknown as {
      steps: number;
      evaluation: { afterStep: number; rewards: number; taskMeans: Record<string, number> }[];
    };
    console.log(`[trl evaluation] ${JSON.stringify(summary.evaluation)}`);
    expect(summary.steps).toBe(6);
    // TRL evaluated after steps 2, 4 and 6 (its prediction_step called the reward): four rows, two
    // without a rods task id, each generated num_generations times.
    expect(summary.evaluation.map((e) => e.afterStep)).toEqual([2, 4, 6]);
    for (const e of summary.evaluation) {
      expect(e.rewards).toBe(4 * G);
      expect(Object.keys(e.taskMeans).length).toBeGreaterThanOrEqual(1);
    }
    await expectStepsClosedInOrder(loop.db, campaign, 6);
    const accepted = await expectCountedOnce(loop.db, campaign);
    // Only the training batches: 2 tasks a step, G rewards each, one batch a step.
    expect(accepted.every((g) => g.n === G)).toBe(true);
    expect(new Set(accepted.map((g) => g.batch_id)).size).toBe(6);
    const perStep = new Map<number, number>();
    for (const g of accepted) perStep.set(g.step, (perStep.get(g.step) ?? 0) + 1);
    expect([...perStep.entries()].sort((a, b) => a[0] - b[0])).toEqual([1, 2, 3, 4, 5, 6].map((s) => [s, 2]));
    const written = JSON.parse(readFileSync(path.join(work, 'evaluation', 'rods-evaluation.json'), 'utf8'));
    expect(written).toEqual(summary.evaluation);
  }, 900_000);

  it("a tool-heavy policy in TRL's tool loop: every call of BFCL's ground truth and every user turn played through the executor, progress 1.0 reported as the step's", async () => {
    const campaign = loop.campaigns.tools!;
    const trainer = new Trainer(campaign, 'tools', {
      RODS_MAX_STEPS: '3',
      RODS_TOOLS: '1',
      RODS_POLICY: 'oracle',
    });
    const episodes: { taskId: string; bfclId: string; calls: number; truthCalls: number; reward: number }[] =
      [];
    trainer.child.stdout!.on('data', (d: Buffer) => {
      for (const m of d.toString().matchAll(/rods-episodes (\[.*\])/g)) episodes.push(...JSON.parse(m[1]!));
    });
    await trainer.finished();
    expect(trainer.summary!.steps).toBe(3);
    // Seeds by id (a generated task's id is its seed's with a ~ suffix): the oracle plays the seed's truth.
    const seeds = episodes.filter((e) => !e.taskId.includes('~') && e.bfclId === e.taskId);
    const calls = episodes.reduce((n, e) => n + e.calls, 0);
    console.log(
      `[trl tools] ${episodes.length} episodes, ${calls} tool calls in the executor (${seeds.length} of seed tasks)`,
    );
    expect(episodes.length).toBe(3 * 8);
    // The seeds' episodes: every ground-truth call ran in TRL's tool loop, every turn passed.
    expect(seeds.length).toBeGreaterThan(0);
    for (const e of seeds) expect([e.calls, e.reward]).toEqual([e.truthCalls, 1]);
    await expectStepsClosedInOrder(loop.db, campaign, 3);
    const accepted = await expectCountedOnce(loop.db, campaign);
    expect(accepted.every((g) => g.n === G)).toBe(true);
    const { rows } = await loop.db.query<{ task_id: string; rewards: number[] }>(
      `select g->>'taskId' as task_id, g->'rewards' as rewards
         from ingestion_batches b join claim_checks c using (claim_id), jsonb_array_elements((c.body->>'groupsJson')::jsonb) g
        where b.campaign_id = $1`,
      [campaign],
    );
    for (const id of new Set(seeds.map((e) => e.taskId)))
      for (const r of rows.filter((x) => x.task_id === id)) expect(r.rewards).toEqual(Array(G).fill(1));
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
      'test_rewards.py::test_an_async_reward_function_gives_an_async_wrapper_trl_awaits',
      'test_rewards.py::test_a_call_without_trainer_state_is_refused_as_trls_async_grpo_makes_it',
    ])
      expect(
        run.log
          .split('\n')
          .some(
            (l) =>
              l.startsWith('PASSED ') &&
              l.endsWith(name.includes('::') ? name : `test_bfcl_environment.py::${name}`),
          ),
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
