// The environment executor: a Python HTTP service (executor/) on bfcl-eval, run from a project
// venv in .stack/venv that is built from executor/requirements.txt (rebuilt when that file changes).
import { createHash } from 'node:crypto';
import { existsSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { ExecutorClient, executorUrl } from '../../activities/executor-client.js';
import { paths } from './paths.js';
import { ourPid, run, StackError, spawnDetached, stopOurs, tail, waitFor, which } from './proc.js';
import { manages, type Probe, type Service } from './service.js';

const NAME = 'executor';
const REQUIREMENTS = path.join(paths.root, 'executor', 'requirements.txt');

export const executorVenv = () => path.join(paths.stack, 'venv');
export const executorPython = () => path.join(executorVenv(), 'bin', 'python');

function requirementsHash(): string {
  return createHash('sha256').update(readFileSync(REQUIREMENTS)).digest('hex').slice(0, 16);
}

const stampPrefix = '.rods-requirements-';
const stampFile = () => path.join(executorVenv(), `${stampPrefix}${requirementsHash()}`);

/** True when the venv was built from the current executor/requirements.txt. */
export function executorVenvCurrent(): boolean {
  return existsSync(stampFile()) && existsSync(executorPython());
}

type ExecError = Error & { stdout?: string; stderr?: string };
const output = (e: ExecError) => `${e.stderr ?? ''}${e.stdout ?? ''}`.trim() || e.message;

/** Builds .stack/venv from executor/requirements.txt unless it was built from this exact file. */
export async function installExecutorVenv(): Promise<void> {
  if (executorVenvCurrent()) return;
  const python = process.env.RODS_PYTHON || 'python3';
  if (!(await which(python))) {
    throw new StackError(
      `\`${python}\` (3.10 or newer) is not on PATH; install it with \`apt-get install -y python3 python3-venv\``,
      NAME,
      false,
    );
  }
  const venv = executorVenv();
  const fresh = !existsSync(executorPython());
  console.log(
    `[executor] ${fresh ? 'creating' : 'rebuilding (executor/requirements.txt changed)'} the Python venv ${venv} ...`,
  );
  // --clear: a changed requirements file gets a clean venv, so removed packages do not linger.
  await run(python, ['-m', 'venv', '--clear', venv]).catch((e: ExecError) => {
    throw new StackError(
      `\`${python} -m venv\` failed (on Debian the venv module is the python3-venv package: apt-get install -y python3-venv; infra/bootstrap.sh installs it):\n${output(e).slice(-2000)}`,
      NAME,
      false,
    );
  });
  // --no-deps: the requirements file is the complete, pinned set (see the comment at its top).
  await run(
    executorPython(),
    [
      '-m',
      'pip',
      'install',
      '--disable-pip-version-check',
      '--no-input',
      '-q',
      '--no-deps',
      '-r',
      REQUIREMENTS,
    ],
    { env: { ...process.env, PIP_NO_INPUT: '1' } },
  ).catch((e: ExecError) => {
    throw new StackError(
      `pip could not install executor/requirements.txt into ${venv} (is PyPI reachable?):\n${output(e).slice(-3000)}`,
      NAME,
      false,
    );
  });
  // The environment modules must import without bfcl-eval's undeclared (here uninstalled) extras.
  await run(executorPython(), ['-c', 'import executor.sandbox'], { cwd: paths.root }).catch(
    (e: ExecError) => {
      throw new StackError(
        `the executor does not import in ${venv}:\n${output(e).slice(-3000)}`,
        NAME,
        false,
      );
    },
  );
  for (const f of readdirSync(venv)) if (f.startsWith(stampPrefix)) rmSync(path.join(venv, f));
  writeFileSync(stampFile(), `${new Date().toISOString()}\n`);
}

export function executorService(): Service {
  const url = executorUrl();
  const { hostname, port: rawPort } = new URL(url);
  const host = hostname.replace(/^\[(.*)\]$/, '$1');
  const port = Number(rawPort || (url.startsWith('https:') ? 443 : 80));
  const log = paths.log(NAME);
  // Our process is the one whose command line carries this stack folder and port.
  const marker = `rods-stack=${paths.stack}:${port}`;
  const client = new ExecutorClient({ url });
  const managed = manages(host, NAME);

  const probe = async (): Promise<Probe> => {
    try {
      const h = await client.health({ timeoutMs: 2000 });
      const seeds = Object.values(h.categories).reduce((a, b) => a + b, 0);
      return {
        answering: true,
        detail: `bfcl-eval ${h.bfcl_eval_version}, ${h.classes.length} environment classes, ${seeds} seed tasks, python ${h.python}`,
      };
    } catch (e) {
      return { answering: false, detail: (e as Error).message };
    }
  };

  const pid = () => ourPid(NAME, marker);

  const stop = (): Promise<boolean> => stopOurs(NAME, pid(), 10_000);

  const start = async (): Promise<void> => {
    const child = spawnDetached(
      NAME,
      executorPython(),
      ['-m', 'executor', '--host', host, '--port', String(port), '--tag', marker],
      { env: { ...process.env, PYTHONUNBUFFERED: '1' }, cwd: paths.root },
    );
    await waitFor(
      NAME,
      async () => (await probe()).answering,
      60_000,
      () => pid() === child,
    ).catch((e) => {
      throw new StackError(`${(e as Error).message}\n--- tail of ${log} ---\n${tail(log)}`, NAME);
    });
  };

  return {
    name: NAME,
    endpoint: url,
    managed,
    port,
    log,
    install: installExecutorVenv,
    pid,
    start,
    probe,
    async ready() {
      if (executorVenvCurrent()) return 'venv matches executor/requirements.txt';
      if (!managed || !pid()) {
        return 'WARNING: .stack/venv was not built from the current executor/requirements.txt (the running executor is not ours to restart)';
      }
      await stop();
      await installExecutorVenv();
      await start();
      return 'executor/requirements.txt changed: venv rebuilt and executor restarted';
    },
    stop,
  };
}
