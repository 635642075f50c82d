// The TRL example (clients/python/examples/trl_grpo.py, as it is: TRL's GRPOTrainer on CPU, BFCL
// environments as tools, the progress reward) on a live rods campaign, twice in the same run: its
// BFCL environments on executor sessions (each tool call runs once) vs. the same client replaying
// each episode's history through /execute at every call (RODS_EXECUTOR_SESSIONS=0, what it did
// before sessions). Each side trains `steps` steps of its own campaign with the tiny random model
// rods_client.tiny builds from the pool's text (one model for both). Figures per side: training
// steps per minute (TRL's own train_runtime), the executor's calls run during the side
// (calls_executed) per step. ratio = sessions' steps per minute / replay's.
// --policy oracle: the tiny random model seldom writes a well-formed call, so this runs the e2e's
// trainer script (clients/python/tests/trl/train.py: the same GRPOTrainer with the BFCL
// environments as tools and the progress reward) with its oracle in place of model.generate,
// playing each base seed's ground truth as tool calls; each side then also counts the tool calls
// TRL ran (tool_calls_per_step) and the executor's calls per tool call.
import { execFile, spawn } from 'node:child_process';
import { mkdirSync, rmSync } from 'node:fs';
import path from 'node:path';
import { createInterface } from 'node:readline';
import { promisify } from 'node:util';
import { executorUrl } from '../../activities/executor-client.js';
import { paths } from '../../infra/stack/paths.js';
import { startLiveLoop } from '../../test/support/live-loop.js';
import { installVenv } from '../../test/support/python/venv.js';
import { ROOT } from '../../test/support/sources.js';
import { LIVE_CAMPAIGN } from '../../test/support/trainer-checks.js';
import type { BenchResult } from './result.js';

const execFileP = promisify(execFile);
const EXAMPLE = path.join(ROOT, 'clients/python/examples/trl_grpo.py');
const TRAINER = path.join(ROOT, 'clients/python/tests/trl/train.py');
// The oracle finds a task by its first user turn, which a miss_func or long_context seed shares
// with its base task: base seeds only.
const ORACLE_CAMPAIGN = { ...LIVE_CAMPAIGN, seeds: { perCategory: 3, categories: ['base'] } };

async function callsExecuted(): Promise<number> {
  const r = await fetch(`${executorUrl()}/health`);
  return ((await r.json()) as { calls_executed: number }).calls_executed;
}

export default async function trlExample(opts: Record<string, string | boolean>): Promise<BenchResult> {
  const steps = Number(opts.steps ?? 10);
  const policy = String(opts.policy ?? 'model');
  if (policy !== 'model' && policy !== 'oracle')
    throw new Error(`--policy is model or oracle, not ${policy}`);
  const oracle = policy === 'oracle';
  const campaign = oracle ? ORACLE_CAMPAIGN : LIVE_CAMPAIGN;
  const log = (m: string) => opts.json || process.stderr.write(`${m}\n`);
  const python = await installVenv('trl');
  const work = path.join(paths.stack, 'bench', `trl-example-${Date.now()}`);
  mkdirSync(work, { recursive: true });
  const loop = await startLiveLoop({
    name: 'bench-trl',
    campaigns: { sessions: campaign, replay: campaign },
    logDir: path.join(work, 'logs'),
  });
  const env = (campaign: string) => loop.trainerEnv(campaign, work);
  try {
    const model = path.join(work, 'tiny-model');
    await execFileP(
      python,
      [
        '-c',
        [
          'from rods_client import RodsClient',
          'from rods_client.tiny import build_tiny_model, pool_texts',
          `build_tiny_model(${JSON.stringify(model)}, pool_texts(RodsClient.from_env().fetch_pool()))`,
        ].join('\n'),
      ],
      { env: env(loop.campaigns.sessions!), cwd: work },
    );
    const side = async (name: 'sessions' | 'replay') => {
      log(
        `${name}: ${steps} steps of ${oracle ? 'the TRL trainer with the oracle policy' : 'the TRL example'} ...`,
      );
      const before = await callsExecuted();
      let toolCalls = 0;
      const started = Date.now();
      const out = await new Promise<string>((resolve, reject) => {
        const child = spawn(python, [oracle ? TRAINER : EXAMPLE], {
          cwd: work,
          env: {
            ...env(loop.campaigns[name]!),
            RODS_MODEL: model,
            RODS_MAX_STEPS: String(steps),
            RODS_OUTPUT_DIR: path.join(work, name),
            ...(name === 'replay' ? { RODS_EXECUTOR_SESSIONS: '0' } : {}),
            ...(oracle ? { RODS_TOOLS: '1', RODS_POLICY: 'oracle' } : {}),
          },
          stdio: ['ignore', 'pipe', 'pipe'],
        });
        let text = '';
        createInterface({ input: child.stdout }).on('line', (line) => {
          text = `${text + line}\n`.slice(-100_000);
          const episodes = /^rods-episodes (\[.*\])$/.exec(line)?.[1];
          if (episodes) for (const e of JSON.parse(episodes) as { calls: number }[]) toolCalls += e.calls;
        });
        child.stderr.on('data', (d) => {
          text = (text + d).slice(-100_000);
        });
        child.on('exit', (code) =>
          code === 0 ? resolve(text) : reject(new Error(`${name}: the example exited ${code}:\n${text}`)),
        );
      });
      const wall = (Date.now() - started) / 1000;
      // transformers logs {'train_runtime': ..., ...} at the end of train()
      const runtime = Number(/'train_runtime':\s*'?([\d.]+)/.exec(out)?.[1] ?? wall);
      const calls = (await callsExecuted()) - before;
      return {
        steps,
        train_runtime_s: Number(runtime.toFixed(1)),
        wall_s: Number(wall.toFixed(1)),
        steps_per_min: Number(((steps * 60) / runtime).toFixed(2)),
        executor_calls_per_step: Number((calls / steps).toFixed(1)),
        ...(oracle
          ? {
              tool_calls_per_step: Number((toolCalls / steps).toFixed(1)),
              // The reward's replay of each episode is in the executor's count too.
              executor_calls_per_tool_call: toolCalls ? Number((calls / toolCalls).toFixed(2)) : null,
            }
          : {}),
      };
    };
    const replay = await side('replay');
    const sessions = await side('sessions');
    return {
      steps,
      policy,
      sessions,
      replay,
      ratio: Number((sessions.steps_per_min / replay.steps_per_min).toFixed(3)),
    };
  } finally {
    await loop.stop();
    rmSync(work, { recursive: true, force: true });
  }
}
