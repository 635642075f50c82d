import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { executorPython } from '../infra/stack/executor.js';
import { paths } from '../infra/stack/paths.js';

// The executor's Python tests (restricted parser, environment runs, sandbox) in the project venv
// that the stack builds from executor/requirements.txt.
describe('executor Python tests (pytest in .stack/venv)', () => {
  it('pass', () => {
    const python = executorPython();
    expect(existsSync(python), `${python} is missing: run \`npm run stack:up\``).toBe(true);
    const r = spawnSync(python, ['-m', 'pytest', 'executor/tests', '-q', '-p', 'no:cacheprovider'], {
      cwd: paths.root,
      encoding: 'utf8',
      env: { ...process.env, PYTHONDONTWRITEBYTECODE: '1' },
      timeout: 300_000,
    });
    const out = `${r.stdout}${r.stderr}`;
    if (r.status !== 0) console.error(out);
    expect(r.error).toBeUndefined();
    expect(r.status).toBe(0);
    // pytest's summary line: N passed, nothing failed or skipped
    expect(out).toMatch(/^\d+ passed in /m);
  });
});
