// `rods ARGS` as a process (bin/rods.mjs against the test stack), for tests that drive the CLI.
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { ROOT } from './sources.js';

/** Runs `rods ARGS --json`-style commands: the exit code and the output parsed (a non-JSON output throws). */
export async function rodsJson(
  args: string[],
  env: NodeJS.ProcessEnv = process.env,
): Promise<{ code: number; json: unknown }> {
  const r = await promisify(execFile)(process.execPath, ['bin/rods.mjs', ...args], {
    cwd: ROOT,
    env,
    maxBuffer: 64 << 20,
  }).then(
    (ok) => ({ code: 0, stdout: ok.stdout, stderr: ok.stderr }),
    (e: { code?: number; stdout?: string; stderr?: string }) => ({
      code: typeof e.code === 'number' ? e.code : -1,
      stdout: e.stdout ?? '',
      stderr: e.stderr ?? '',
    }),
  );
  try {
    return { code: r.code, json: JSON.parse(r.stdout) };
  } catch {
    throw new Error(`rods ${args.join(' ')} exited ${r.code} without JSON:\n${r.stdout}\n${r.stderr}`);
  }
}
