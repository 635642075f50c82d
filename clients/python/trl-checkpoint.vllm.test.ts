// A checkpoint that TRL trained, served by vLLM and scored on BFCL's held-out tasks: the TRL example
// (clients/python/examples/trl_grpo.py, as it is) trains its tiny model for 2 steps on a live
// campaign and saves checkpoint-2, whose CheckpointSaved the adapter records; the stack's vLLM
// script serves that folder as a second instance beside the generator's; `rods eval run` starts
// the evaluation that the loop's worker runs through the stack executor's bfcl-eval route (bfcl's
// own multi-turn inference and checker); `rods eval show` and the dashboard's route read it.
//
// npm test's third run (vitest.vllm.config.ts: the stack and vLLM up). The tiny model is random,
// so its accuracy is near 0: what is checked is that every task went through vLLM and bfcl's
// checker and that the bookkeeping ties the result to the checkpoint's manifest.
import { type ChildProcess, spawn } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { existsSync, mkdirSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { paths } from '../../infra/stack/paths.js';
import type { Service } from '../../infra/stack/service.js';
import { vllmService } from '../../infra/stack/vllm.js';
import { evaluationView } from '../../platform/store/events/evaluations.js';
import { freePort } from '../../platform/util/free-port.js';
import { rodsJson } from '../../test/support/cli.js';
import { type LiveLoop, startLiveLoop } from '../../test/support/live-loop.js';
import { installVenv } from '../../test/support/python/venv.js';
import { LIVE_CAMPAIGN } from '../../test/support/trainer-checks.js';
import { waitUntil } from '../../test/support/wait.js';

const EXAMPLE = fileURLToPath(new URL('./examples/trl_grpo.py', import.meta.url));
const SERVED = 'trl-checkpoint-2';
// The random model never stops writing: vLLM's server-wide cap on answer length
// (`max_new_tokens` in the generation config, vllm/config/model.py:359-360; used when a request
// sets no max_tokens, vllm/entrypoints/serve/utils/api_utils.py:190-194, and bfcl-eval's FC
// handler sets none, openai_completion.py:84-92) keeps each turn short, so every task reaches
// bfcl's checker instead of filling the context.
const ANSWER_TOKENS = 32;

let loop: LiveLoop;
let work: string;
let checkpointServer: Service | undefined;
let trainer: ChildProcess | undefined;

function runExample(campaign: string, outputDir: string): Promise<string> {
  return new Promise((resolve, reject) => {
    let out = '';
    trainer = spawn(python, [EXAMPLE], {
      cwd: work,
      env: {
        ...loop.trainerEnv(campaign, work),
        RODS_OUTPUT_DIR: outputDir,
        RODS_MAX_STEPS: '2',
      },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    const take = (chunk: Buffer) => {
      out = (out + chunk.toString()).slice(-20_000);
    };
    trainer.stdout!.on('data', take);
    trainer.stderr!.on('data', take);
    trainer.once('exit', (code, signal) =>
      code === 0 ? resolve(out) : reject(new Error(`the TRL example exited with ${code ?? signal}:\n${out}`)),
    );
  });
}
let python = '';

beforeAll(async () => {
  python = await installVenv('trl');
  work = path.join(paths.stack, 'tests', `trl-checkpoint-${randomUUID().slice(0, 8)}`);
  mkdirSync(work, { recursive: true });
  loop = await startLiveLoop({
    name: 'trl-checkpoint',
    campaigns: { example: LIVE_CAMPAIGN },
    logDir: path.join(work, 'logs'),
  });
}, 1_800_000);

afterAll(async () => {
  trainer?.kill('SIGKILL');
  await checkpointServer?.stop();
  await loop?.stop();
  if (work && process.env.RODS_KEEP_TEST_OUTPUT !== '1') rmSync(work, { recursive: true, force: true });
});

describe("a TRL checkpoint served by vLLM and scored by bfcl-eval's checker", () => {
  it('trains 2 steps with the TRL example, serves checkpoint-2, evaluates it, and shows the result tied to its manifest', async () => {
    const campaign = loop.campaigns.example!;
    const outputDir = path.join(work, 'example');
    await runExample(campaign, outputDir);

    // The checkpoint TRL saved at its last step (transformers' trainer_callback.py:602-604), with
    // the record the adapter writes beside it.
    const folder = path.join(outputDir, 'checkpoint-2');
    const record = JSON.parse(readFileSync(path.join(folder, 'rods-checkpoint.json'), 'utf8')) as {
      checkpointId: string;
      step: number;
    };
    expect(record.step).toBe(2);
    for (const f of ['config.json', 'model.safetensors', 'tokenizer.json'])
      expect(existsSync(path.join(folder, f)), f).toBe(true);
    type Listed = { checkpointId: string; trainerStep: number };
    const listed = (await rodsJson(['manifest', 'list', '--campaign', campaign, '--json'])).json as Listed[];
    expect(listed.map((c) => [c.checkpointId, c.trainerStep])).toEqual([[record.checkpointId, 2]]);
    const manifest = (
      await rodsJson(['manifest', '--campaign', campaign, '--checkpoint', record.checkpointId, '--json'])
    ).json as { root: string };

    // The stack's vLLM script, serving the checkpoint folder as a second instance.
    const port = await freePort();
    checkpointServer = vllmService(
      {
        ...process.env,
        RODS_VLLM_MODEL: folder,
        RODS_VLLM_MODEL_NAME: SERVED,
        RODS_VLLM_PORT: String(port),
        RODS_VLLM_MAX_MODEL_LEN: '32768',
        RODS_VLLM_ARGS: `--dtype float32 --override-generation-config {"max_new_tokens":${ANSWER_TOKENS}}`,
      },
      { instance: 'checkpoint' },
    );
    const t0 = Date.now();
    await checkpointServer.start();
    const startSeconds = (Date.now() - t0) / 1000;
    expect((await checkpointServer.probe()).detail).toContain(SERVED);

    // One held-out task per category, two at a time, by the loop's own worker.
    const env = { ...process.env, RODS_TASK_QUEUE: loop.taskQueue };
    const started = (
      await rodsJson(
        [
          'eval',
          'run',
          '--campaign',
          campaign,
          '--checkpoint',
          record.checkpointId,
          '--endpoint',
          checkpointServer.endpoint,
          '--model',
          SERVED,
          '--per-category',
          '1',
          '--concurrency',
          '2',
          '--no-wait',
          '--json',
        ],
        env,
      )
    ).json as { evaluationId: string };
    const id = started.evaluationId;
    const t1 = Date.now();
    let last: Awaited<ReturnType<typeof evaluationView>>;
    await waitUntil(
      async () => {
        last = await evaluationView(loop.db, id);
        return last !== undefined && last !== null && last.status !== 'running';
      },
      {
        timeoutMs: 900_000,
        intervalMs: 1000,
        what: () => `the evaluation ${id} to end: ${JSON.stringify(last)}`,
      },
    );
    const evalSeconds = (Date.now() - t1) / 1000;
    const v = (await evaluationView(loop.db, id))!;
    expect(v.status, v.reason ?? '').toBe('completed');
    expect(v).toMatchObject({
      checkpointId: record.checkpointId,
      trainerStep: 2,
      manifestRoot: manifest.root,
      model: SERVED,
      bfclEvalVersion: '2026.3.23',
      tasks: 4,
      scored: 4,
      total: 4,
    });
    expect(v.categories.map((c) => c.category).sort()).toEqual([
      'base',
      'long_context',
      'miss_func',
      'miss_param',
    ]);
    // Every task was played through vLLM to the end of its turns and judged by bfcl's checker: a
    // verdict of its own (multi_turn:*), never one of rods' for a conversation cut short; the
    // tokens are vLLM's usage, and the accuracy is the count of tasks the checker accepted.
    for (const o of v.outcomes) {
      if (!o.valid) expect(o.errorType, `${o.taskId}: ${o.error}`).toMatch(/^multi_turn:/);
      expect(o.errorType ?? '').not.toMatch(/force_terminated|context_length/);
      expect(o.turns, o.taskId).toBeGreaterThan(0);
      expect(o.promptTokens, o.taskId).toBeGreaterThan(0);
      expect(o.completionTokens, o.taskId).toBeGreaterThan(0);
    }
    expect(v.correct).toBe(v.outcomes.filter((o) => o.valid).length);

    // `rods eval show` and the dashboard read it.
    const shown = (await rodsJson(['eval', 'show', id, '--json'])).json as {
      status: string;
      checkpointId: string;
      overall: { correct: number; total: number };
      outcomes: unknown[];
    };
    expect(shown).toMatchObject({ status: 'completed', checkpointId: record.checkpointId });
    expect(shown.overall).toMatchObject({ correct: v.correct, total: 4 });
    expect(shown.outcomes).toHaveLength(4);
    const dashboard = (await (
      await fetch(`${loop.gatewayUrl}/v1/campaigns/${campaign}/dashboard/evaluations`, {
        headers: { authorization: `Bearer ${loop.trainerToken}` },
      })
    ).json()) as { evaluations: { evaluationId: string; trainerStep: number; overall: { total: number } }[] };
    expect(dashboard.evaluations).toEqual([
      expect.objectContaining({
        evaluationId: id,
        trainerStep: 2,
        overall: expect.objectContaining({ total: 4 }),
      }),
    ]);

    // The figures for the closing note of the change that added this test.
    // The server and its engine: the processes of the group it leads.
    const group = checkpointServer.pid()!;
    let rssKb = 0;
    for (const p of readdirSync('/proc').filter((d) => /^\d+$/.test(d))) {
      try {
        const stat = readFileSync(`/proc/${p}/stat`, 'utf8');
        if (Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[2]) !== group) continue;
        rssKb += Number(readFileSync(`/proc/${p}/status`, 'utf8').match(/VmRSS:\s+(\d+)/)?.[1] ?? 0);
      } catch {
        /* gone meanwhile */
      }
    }
    const taskSeconds = v.outcomes.reduce((a, o) => a + o.durationMs, 0) / 1000;
    console.log(
      `[trl checkpoint on vLLM] start ${startSeconds.toFixed(1)} s, RSS of the server and its engine ${(rssKb / 1024).toFixed(0)} MB, ` +
        `evaluation ${evalSeconds.toFixed(1)} s for 4 tasks at concurrency 2 (bfcl's inference and check ${taskSeconds.toFixed(1)} s of task time), accuracy ${v.correct}/4, ` +
        `verdicts ${JSON.stringify(v.outcomes.map((o) => [o.taskId, o.errorType, o.turns, o.promptTokens, o.completionTokens, o.durationMs]))}`,
    );
  }, 1_800_000);
});
