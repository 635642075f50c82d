// verl 0.9.1's real classes driving rods_client.verl against a campaign of the whole loop as
// processes (gateway, worker, aggregator, relay, stand-in generator, environment executor): the
// example's Hydra config, verl's data loading, its AgentLoopWorkerTQ running each row in
// rods_client.verl.RodsBfclAgentLoop (BFCL multi-turn episodes, tool calls in the rods executor),
// its reward loop, its replay buffer over a real TransferQueue. The policy (vLLM or SGLang on GPUs)
// is the one replaced piece: clients/python/tests/verl/test_verl_v1.py says what is verl's code and
// what is not; clients/python/gpu/verl_bfcl.py runs the example through main_ppo on GPUs.
import { spawn } from 'node:child_process';
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

type Episode = { taskId: string; reward: number; calls: string[][]; userTurns: number; turns: number };

const TESTS = fileURLToPath(new URL('./tests/verl', import.meta.url));
// Enough steps for generated tasks to be injected and then drawn (injection cadence: every step);
// each step runs 8 BFCL episodes through the executor, so the suite's time grows with it.
const STEPS = 14;

let python: string;
let loop: LiveLoop;
let work: string;

beforeAll(async () => {
  python = await installVenv('verl');
  work = path.join(paths.stack, 'tests', `verl-${randomUUID().slice(0, 8)}`);
  mkdirSync(work, { recursive: true });
  loop = await startLiveLoop({
    name: 'verl',
    campaigns: { verl: LIVE_CAMPAIGN },
    logDir: path.join(work, 'logs'),
  });
}, 1_800_000);

afterAll(async () => {
  await loop?.stop();
  if (work && process.env.RODS_KEEP_TEST_OUTPUT !== '1') rmSync(work, { recursive: true, force: true });
});

describe('verl 0.9.1 (real classes, CPU) on the live pool', () => {
  it('runs BFCL multi-turn episodes of the live pool in verl agent loop (tasks injected mid-run too), reports each global step once across a resume', async () => {
    const campaign = loop.campaigns.verl!;
    const output = path.join(work, 'summary.json');
    const out = await new Promise<string>((resolve, reject) => {
      let log = '';
      const child = spawn(python, ['-m', 'pytest', TESTS, '-q', '-p', 'no:cacheprovider', '-rA', '-x'], {
        cwd: work,
        env: {
          ...process.env,
          PYTHONUNBUFFERED: '1',
          RODS_GATEWAY_URL: loop.gatewayUrl,
          RODS_TOKEN: loop.trainerToken,
          RODS_CAMPAIGN: campaign,
          RODS_OUTPUT: output,
          RODS_STEPS: String(STEPS),
          RAY_DEDUP_LOGS: '0',
        },
        stdio: ['ignore', 'pipe', 'pipe'],
      });
      child.stdout.on('data', (d) => {
        log = (log + d).slice(-20_000);
      });
      child.stderr.on('data', (d) => {
        log = (log + d).slice(-20_000);
      });
      child.once('exit', (code) =>
        code === 0 ? resolve(log) : reject(new Error(`pytest failed (${code}):\n${log}`)),
      );
    });
    expect(out).toMatch(/\b5 passed/);
    for (const name of [
      'test_verl_runs_bfcl_episodes_of_the_live_pool_in_its_agent_loop_and_reports_each_step_once_across_a_resume',
      'test_a_shuffling_sampler_is_refused_by_name',
      'test_dapo_keeps_filtering_and_the_groups_it_drops_are_reported_with_the_step',
      'test_an_async_trainer_gets_verls_async_buffer_with_staleness_eviction',
      'test_the_gpu_script_composes_with_the_example_and_passes_verls_own_config_validation',
    ])
      expect(out, name).toMatch(new RegExp(`PASSED .*test_verl_v1\\.py::${name}`));
    const summary = JSON.parse(readFileSync(output, 'utf8')) as {
      steps: number;
      batch: number;
      n: number;
      drawn: Record<string, { taskId: string; version: number }[]>;
      episodes: Record<string, Episode[]>;
    };
    await expectStepsClosedInOrder(loop.db, campaign, summary.steps);
    const accepted = await expectCountedOnce(loop.db, campaign);
    // One group a task a step: a task drawn twice in a batch (a small pool) has both rows' rollouts.
    const draws = (step: number, taskId: string) =>
      (summary.drawn[String(step)] ?? []).filter((x) => x.taskId === taskId).length;
    expect(accepted.filter((g) => g.n !== summary.n * draws(g.step, g.task_id))).toEqual([]);
    const perStep = new Map<number, Set<string>>();
    for (const g of accepted) perStep.set(g.step, (perStep.get(g.step) ?? new Set()).add(g.batch_id));
    for (let s = 1; s <= summary.steps; s++) expect([...(perStep.get(s) ?? [])]).toEqual([`step-${s}`]);
    // Generated tasks drawn by verl's data loader after their injection, run as BFCL episodes in
    // verl's agent loop (calls in the executor, later user turns) and rewarded in rods as verl scored them.
    const injected = await injections(loop.db, campaign);
    const drawnAfter = injected.filter((r) =>
      Object.entries(summary.drawn).some(
        ([step, rows]) => Number(step) > r.step && rows.some((x) => x.taskId === r.task_id),
      ),
    );
    console.log(
      `[verl] ${summary.steps} steps; ${injected.length} injected, ${drawnAfter.length} drawn by verl's loader after injection (${JSON.stringify(drawnAfter.slice(0, 3))})`,
    );
    expect(drawnAfter.length).toBeGreaterThan(0);
    const multiTurn = (e: Episode) => e.userTurns >= 2 && e.calls.flat().length > 0;
    let checked = 0;
    for (const [step, eps] of Object.entries(summary.episodes)) {
      for (const taskId of new Set(eps.map((e) => e.taskId))) {
        const mine = eps.filter((e) => e.taskId === taskId);
        const isInjected = injected.some((r) => r.task_id === taskId && r.step < Number(step));
        if (!isInjected || !mine.some(multiTurn)) continue;
        const { rows } = await loop.db.query<{ rewards: number[] }>(
          `select g->'rewards' as rewards from ingestion_batches b join claim_checks c using (claim_id),
                  jsonb_array_elements((c.body->>'groupsJson')::jsonb) g
            where b.campaign_id = $1 and b.step = $2 and g->>'taskId' = $3`,
          [campaign, Number(step), taskId],
        );
        expect(rows.map((r) => [...r.rewards].sort())).toEqual([mine.map((e) => e.reward).sort()]);
        checked++;
      }
    }
    console.log(
      `[verl] ${checked} groups of injected tasks with multi-turn episodes, rewards as reported to rods`,
    );
    expect(checked).toBeGreaterThan(0);
  }, 1_200_000);
});
