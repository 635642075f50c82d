// Starts the stand-in generator (a stand-in for vLLM, see dev/standin/) as a child process on a free
// port, for tests and benchmarks.
import { type ChildProcess, spawn } from 'node:child_process';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import type { GeneratorEndpointInput } from '../../activities/llm/endpoints.js';
import { freePort } from '../../platform/util/free-port.js';
import { waitUntil } from '../../test/support/wait.js';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');

export interface StandinProcess {
  url: string;
  child: ChildProcess;
  stop(): Promise<void>;
}

export async function startStandin(flags: string[] = []): Promise<StandinProcess> {
  const port = await freePort();
  const child = spawn(
    process.execPath,
    [path.join(ROOT, 'bin/rods-dev.mjs'), 'standin-generator', '--port', String(port), ...flags],
    {
      cwd: ROOT,
      stdio: ['ignore', 'ignore', 'pipe'],
    },
  );
  let stderr = '';
  child.stderr!.on('data', (d) => {
    stderr = (stderr + d).slice(-4000);
  });
  const url = `http://127.0.0.1:${port}/v1`;
  await waitUntil(
    async () => {
      try {
        if ((await fetch(`${url}/models`)).ok) return true;
      } catch {
        /* not up yet */
      }
      if (child.exitCode !== null) throw new Error(`stand-in generator exited: ${stderr}`);
      return false;
    },
    {
      what: () => `the stand-in generator to answer at ${url}: ${stderr}`,
      timeoutMs: 30_000,
      intervalMs: 200,
    },
  );
  return {
    url,
    child,
    stop: () =>
      new Promise<void>((resolve) => {
        if (child.exitCode !== null) return resolve();
        child.once('exit', () => resolve());
        child.kill('SIGTERM');
      }),
  };
}

/** The campaign config's generator section for the stand-in: the endpoint it is, its model, non-secret knobs. */
export function standinGenerator(extra: Record<string, unknown> = {}): Record<string, unknown> {
  return {
    endpoint: 'default',
    model: 'rods-standin-generator',
    judgeModel: 'rods-standin-generator',
    ...extra,
  };
}

/**
 * The worker's endpoints with the stand-in at `url` as `default`; `headers` go with every request
 * (the stand-in's fault headers), like a key they are the operator's, never the campaign's.
 */
export function standinEndpoints(
  url: string,
  headers: Record<string, string> = {},
  apiKey?: string,
): Record<string, GeneratorEndpointInput> {
  return { default: { baseUrl: url, headers, ...(apiKey !== undefined ? { apiKey } : {}) } };
}

/** The same for a worker process: its environment variables. */
export function standinEndpointEnv(
  url: string,
  headers: Record<string, string> = {},
): Record<string, string> {
  return { RODS_GENERATOR_BASE_URL: url, RODS_GENERATOR_HEADERS: JSON.stringify(headers) };
}

/** The stand-in's fault header that makes every generator call hang (see hangingSynthesisConfig). */
export const HANG_HEADERS = { 'x-rods-fault': 'timeout' };

/**
 * A small campaign whose every generator call hangs on the stand-in (give the worker
 * standinEndpoints(url, HANG_HEADERS)), so a synthesis child stays running until it is terminated
 * (the slot tests); one synthesis at a time.
 */
export function hangingSynthesisConfig(): Record<string, unknown> {
  return {
    seeds: { perCategory: 3 },
    selection: {
      budgetPerStep: 2,
      perCategoryQuota: { base: 1, miss_func: 1, miss_param: 0, long_context: 0 },
      cooldownSteps: 0,
      maxConcurrentSyntheses: 1,
    },
    generator: standinGenerator({ timeoutMs: 120_000 }),
  };
}

/**
 * A campaign config on the stand-in: `perCategory` seeds of each category, `quota` seeds selected
 * per category and step, all synthesized at once, no cooldown; `extra` sections are merged in
 * (its `selection` into the selection).
 */
export function standinCampaign(
  perCategory: number,
  quota: Partial<Record<'base' | 'miss_func' | 'miss_param' | 'long_context', number>>,
  extra: Record<string, unknown> & { selection?: Record<string, unknown> } = {},
): Record<string, unknown> {
  const perCategoryQuota = { base: 0, miss_func: 0, miss_param: 0, long_context: 0, ...quota };
  const budget = Object.values(perCategoryQuota).reduce((a, b) => a + b, 0);
  const { selection, ...rest } = extra;
  return {
    seeds: { perCategory },
    selection: {
      budgetPerStep: budget,
      perCategoryQuota,
      cooldownSteps: 0,
      maxConcurrentSyntheses: budget,
      ...selection,
    },
    generator: standinGenerator(),
    ...rest,
  };
}
