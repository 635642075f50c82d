// The Python venvs of the client's tests, each built from a pinned requirements file (installed
// with --no-deps: every file is a closed, fully pinned set) and rebuilt when that file changes,
// with the client itself installed the way a trainer installs it: `pip install ./clients/python`.
//
// - `client`: .stack/client-venv (transformers without torch, pytest), for the adapter tests.
// - `trl`: torch, transformers, TRL, accelerate, datasets: ~5.9 GB (the Linux torch wheel brings
//   the CUDA libraries), so it lives outside the clone, cached by the hash of its requirements in
//   ~/.cache/rods/venvs/trl-<hash> ($RODS_VENV_CACHE): CI in a fresh clone finds it built.
// - `verl`: verl 0.9.1 with its verl-core extra (TransferQueue, ray): ~6.5 GB, cached the same way.
//
// `npx tsx test/support/python/venv.ts [client|trl|verl ...]` builds them (.ci/run does, before the tests).
import { execFile } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { paths, venvCache } from '../../../infra/stack/paths.js';

const execFileP = promisify(execFile);
const CLIENT_DIR = path.join(paths.root, 'clients', 'python');
// Bounded so a hung registry fails CI with a message instead of eating its time budget.
const PIP_TIMEOUT_MS = 20 * 60_000;

export type VenvName = 'client' | 'trl' | 'verl';

interface VenvSpec {
  requirements: string;
  /** Cached outside the clone (big, shared by every clone on the machine). */
  shared: boolean;
}

const SPECS: Record<VenvName, VenvSpec> = {
  client: { requirements: 'requirements-test.txt', shared: false },
  trl: { requirements: 'requirements-trl.txt', shared: true },
  verl: { requirements: 'requirements-verl.txt', shared: true },
};

const requirementsPath = (name: VenvName) => path.join(CLIENT_DIR, SPECS[name].requirements);
const requirementsHash = (name: VenvName) =>
  createHash('sha256')
    .update(readFileSync(requirementsPath(name)))
    .digest('hex')
    .slice(0, 16);

export function venvDir(name: VenvName): string {
  return SPECS[name].shared
    ? path.join(venvCache(), `${name}-${requirementsHash(name)}`)
    : path.join(paths.stack, `${name}-venv`);
}
export const venvPython = (name: VenvName) => path.join(venvDir(name), 'bin', 'python');

// The names the adapter tests use.
export const clientVenv = () => venvDir('client');
export const clientPython = () => venvPython('client');

const stampPrefix = '.rods-requirements-';
const stampFile = (name: VenvName) => path.join(venvDir(name), `${stampPrefix}${requirementsHash(name)}`);

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

/** Builds the venv from its requirements unless it was built from this exact file; installs the client. */
export async function installVenv(name: VenvName): Promise<string> {
  const dir = venvDir(name);
  if (!(existsSync(stampFile(name)) && existsSync(venvPython(name)))) {
    const started = Date.now();
    console.log(`[client] building the Python venv ${dir} (clients/python/${SPECS[name].requirements}) ...`);
    const python = process.env.RODS_PYTHON || 'python3';
    // The stamp is written last: a build that was interrupted (a shared venv takes minutes) has
    // none and is built again from scratch.
    mkdirSync(path.dirname(dir), { recursive: true });
    await step(`\`${python} -m venv\` (Debian: apt-get install -y python3-venv)`, python, [
      '-m',
      'venv',
      '--clear',
      dir,
    ]);
    await step(
      `pip install -r clients/python/${SPECS[name].requirements} (is PyPI reachable?)`,
      venvPython(name),
      ['-m', 'pip', 'install', '-q', '--no-deps', '--no-compile', '-r', requirementsPath(name)],
    );
    for (const f of readdirSync(dir)) if (f.startsWith(stampPrefix)) rmSync(path.join(dir, f));
    writeFileSync(stampFile(name), `${new Date().toISOString()}\n`);
    // A shared venv of an older requirements file is gigabytes nobody uses any more.
    if (SPECS[name].shared)
      for (const f of readdirSync(path.dirname(dir)))
        if (f.startsWith(`${name}-`) && path.join(path.dirname(dir), f) !== dir) {
          console.log(
            `[client] removing ${f}, built from an older clients/python/${SPECS[name].requirements}`,
          );
          rmSync(path.join(path.dirname(dir), f), { recursive: true, force: true });
        }
    console.log(`[client] ${dir} built in ${Math.round((Date.now() - started) / 1000)} s`);
  }
  await installClientPackage(name);
  return venvPython(name);
}

/** The adapter tests' venv (the name they have always used). */
export const installClientVenv = () => installVenv('client');

/** `pip install ./clients/python` into the venv: the package as a trainer installs it, afresh. */
export async function installClientPackage(name: VenvName = 'client'): Promise<string> {
  return step('pip install ./clients/python', venvPython(name), [
    '-m',
    'pip',
    'install',
    '-q',
    '--no-deps',
    '--force-reinstall',
    `./${path.relative(paths.root, CLIENT_DIR)}`,
  ]);
}

if (process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const names = (process.argv.slice(2).length ? process.argv.slice(2) : ['client']) as VenvName[];
  (async () => {
    for (const name of names) {
      if (!(name in SPECS)) throw new Error(`unknown venv ${name}; known: ${Object.keys(SPECS).join(', ')}`);
      console.log(`[client] ${await installVenv(name)} ready`);
    }
  })().catch((e: Error) => {
    console.error(`[client] ${e.message}`);
    process.exit(1);
  });
}
