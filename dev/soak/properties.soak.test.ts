// The checkpoint manifests' and the reporter's property tests with thousands of cases, after the
// chaos soak (npm test runs the same files with a few dozen): the pure model of random training
// histories (domain/manifest-history.unit.test.ts), the same histories on the real gateway and
// store (entry/gateway/checkpoints-history.int.test.ts, on the shared stack `npm test` started),
// and the reporter's spool under kills and outages against a model of the gateway's contract
// (clients/python/tests/test_reporting_properties.py, hypothesis).
import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { clientPython } from '../../test/support/python/venv.js';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const CASES = {
  model: Number(process.env.RODS_SOAK_PROPERTY_RUNS ?? 20_000),
  gateway: Number(process.env.RODS_SOAK_PROPERTY_RUNS_INT ?? 2_000),
  reporter: Number(process.env.RODS_SOAK_PROPERTY_EXAMPLES ?? 2_000),
};

function run(
  cmd: string,
  args: string[],
  env: Record<string, string>,
): Promise<{ code: number; out: string }> {
  return new Promise((resolve) => {
    let out = '';
    const child = spawn(cmd, args, {
      cwd: ROOT,
      env: { ...process.env, ...env },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    child.stdout.on('data', (d) => {
      out += d;
    });
    child.stderr.on('data', (d) => {
      out += d;
    });
    child.on('exit', (c) => resolve({ code: c ?? 1, out }));
  });
}

// verbose: every test's name (which carries its number of cases) is printed, passing or not.
const vitest = (config: string, file: string, env: Record<string, string>) =>
  run('npx', ['vitest', 'run', '--reporter=verbose', '--passWithNoTests', '--config', config, file], env);

describe('property tests with thousands of cases', () => {
  it(
    `${CASES.model} random training histories on the domain core`,
    async () => {
      const r = await vitest('vitest.unit.config.ts', 'domain/manifest-history.unit.test.ts', {
        RODS_PROPERTY_RUNS: String(CASES.model),
      });
      expect(r.code, r.out.slice(-3000)).toBe(0);
      expect(r.out).toContain(`${CASES.model} histories`);
    },
    20 * 60_000,
  );

  it(
    `${CASES.gateway} random training histories on the real gateway and store`,
    async () => {
      const r = await vitest('vitest.config.ts', 'entry/gateway/checkpoints-history.int.test.ts', {
        RODS_PROPERTY_RUNS_INT: String(CASES.gateway),
      });
      expect(r.code, r.out.slice(-3000)).toBe(0);
      expect(r.out).toContain(`${CASES.gateway} histories`);
    },
    30 * 60_000,
  );

  it(
    `${CASES.reporter} random report sequences through the reporter's spool (kills, outages, refusals)`,
    async () => {
      const python = clientPython();
      expect(existsSync(python), `${python} (the client venv npm test builds)`).toBe(true);
      const r = await run(
        python,
        ['-m', 'pytest', '-q', '-p', 'no:cacheprovider', 'clients/python/tests/test_reporting_properties.py'],
        { RODS_PROPERTY_EXAMPLES: String(CASES.reporter), PYTHONPATH: path.join(ROOT, 'clients/python') },
      );
      expect(r.code, r.out.slice(-3000)).toBe(0);
      expect(r.out).toMatch(/\d+ passed/);
    },
    30 * 60_000,
  );
});
