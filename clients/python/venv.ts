// The Python venv of the client's adapter tests: .stack/client-venv, built from
// clients/python/requirements-test.txt (rebuilt when that file changes), with the client itself
// installed the way a trainer installs it: `pip install ./clients/python`.
// `npx tsx clients/python/venv.ts` builds it (.ci/run does, before the tests).
import { execFile } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { paths } from '../../infra/stack/paths.js';

const execFileP = promisify(execFile);
const CLIENT_DIR = path.join(paths.root, 'clients', 'python');
const REQUIREMENTS = path.join(CLIENT_DIR, 'requirements-test.txt');
// Bounded so a hung registry fails CI with a message instead of eating its time budget.
const PIP_TIMEOUT_MS = 10 * 60_000;

export const clientVenv = () => path.join(paths.stack, 'client-venv');
export const clientPython = () => path.join(clientVenv(), 'bin', 'python');

const stampPrefix = '.rods-requirements-';
const stampFile = () =>
  path.join(
    clientVenv(),
    `${stampPrefix}${createHash('sha256').update(readFileSync(REQUIREMENTS)).digest('hex').slice(0, 16)}`,
  );

type ExecError = Error & { stdout?: string; stderr?: string };
const output = (e: ExecError) => `${e.stderr ?? ''}${e.stdout ?? ''}`.trim() || e.message;

async function step(what: string, cmd: string, args: string[], timeout = PIP_TIMEOUT_MS): Promise<string> {
  try {
    const { stdout, stderr } = await execFileP(cmd, args, {
      cwd: paths.root,
      env: { ...process.env, PIP_NO_INPUT: '1', PIP_DISABLE_PIP_VERSION_CHECK: '1' },
      maxBuffer: 16 * 1024 * 1024,
      timeout,
    });
    return `${stdout}${stderr}`;
  } catch (e) {
    throw new Error(`${what} failed:\n${output(e as ExecError).slice(-3000)}`);
  }
}

/** Builds .stack/client-venv from requirements-test.txt unless it was built from this exact file. */
export async function installClientVenv(): Promise<void> {
  const venv = clientVenv();
  if (!(existsSync(stampFile()) && existsSync(clientPython()))) {
    console.log(`[client] building the Python venv ${venv} (clients/python/requirements-test.txt) ...`);
    const python = process.env.RODS_PYTHON || 'python3';
    await step(`\`${python} -m venv\` (Debian: apt-get install -y python3-venv)`, python, [
      '-m',
      'venv',
      '--clear',
      venv,
    ]);
    // --no-deps: the requirements file is the complete, pinned set (see the comment at its top).
    await step(
      `pip install -r ${path.relative(paths.root, REQUIREMENTS)} (is PyPI reachable?)`,
      clientPython(),
      ['-m', 'pip', 'install', '-q', '--no-deps', '--no-compile', '-r', REQUIREMENTS],
    );
    for (const f of readdirSync(venv)) if (f.startsWith(stampPrefix)) rmSync(path.join(venv, f));
    writeFileSync(stampFile(), `${new Date().toISOString()}\n`);
  }
  await installClientPackage();
}

/** `pip install ./clients/python` into the venv: the package as a trainer installs it, afresh. */
export async function installClientPackage(): Promise<string> {
  return step('pip install ./clients/python', clientPython(), [
    '-m',
    'pip',
    'install',
    '-q',
    '--force-reinstall',
    `./${path.relative(paths.root, CLIENT_DIR)}`,
  ]);
}

if (process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  installClientVenv().then(
    () => console.log(`[client] ${clientVenv()} ready`),
    (e: Error) => {
      console.error(`[client] ${e.message}`);
      process.exit(1);
    },
  );
}
