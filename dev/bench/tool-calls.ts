// What a trainer's BFCL tool call costs in the executor: episodes of seed tasks played one tool
// call at a time as rods_client.bfcl.BfclEnvironment plays them for TRL and slime (the
// ground-truth calls as the policy's), on executor sessions (each call runs once, on the
// episode's live environment) vs. the same client replaying each episode's history through
// /execute (what it did before sessions), in the same run against the same executor.
// Figures per side: executor calls per tool call (from the executor's calls_executed), tool-call
// latency p50/p99, tool-call time per episode, the progress reward (equal on both sides).
// ratio = sessions' tool-call time per episode / replay's.
import { execFile } from 'node:child_process';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { executorUrl } from '../../activities/executor-client.js';
import { clientPython, installClientPackage } from '../../test/support/python/venv.js';
import type { BenchResult } from './result.js';

const execFileP = promisify(execFile);
const DRIVER = path.join(path.dirname(fileURLToPath(import.meta.url)), 'python', 'tool_calls.py');

interface Side {
  mode: string;
  episodes: number;
  tool_calls: number;
  executor_calls_per_tool_call: number;
  tool_calls_ms_per_episode: number;
  mean_reward: number;
  [figure: string]: number | string;
}

export default async function toolCalls(opts: Record<string, string | boolean>): Promise<BenchResult> {
  const perCategory = String(opts['per-category'] ?? 10);
  const url = executorUrl();
  const log = (m: string) => opts.json || process.stderr.write(`${m}\n`);
  await installClientPackage();
  const side = async (mode: 'sessions' | 'replay'): Promise<Side> => {
    log(`${mode}: ${perCategory} episodes per category against ${url} ...`);
    const { stdout } = await execFileP(clientPython(), [DRIVER, url, perCategory, mode], {
      env: { ...process.env, PYTHONDONTWRITEBYTECODE: '1' },
      maxBuffer: 16 * 1024 * 1024,
    });
    return JSON.parse(stdout) as Side;
  };
  // Replay first: a warm executor favours the side measured second, which is the new one's rival.
  const replay = await side('replay');
  const sessions = await side('sessions');
  if (sessions.mean_reward !== replay.mean_reward)
    throw new Error(`the two sides scored differently: ${sessions.mean_reward} vs ${replay.mean_reward}`);
  return {
    episodes: sessions.episodes,
    tool_calls: sessions.tool_calls,
    sessions,
    replay,
    ratio: Number((sessions.tool_calls_ms_per_episode / replay.tool_calls_ms_per_episode).toFixed(3)),
  };
}
