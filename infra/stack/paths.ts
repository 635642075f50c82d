// Where the local stack keeps its cached artifacts, data, logs and pid files. Everything
// lives under one ignored folder (.stack/ by default) so a clean checkout rebuilds it.
import { mkdirSync } from 'node:fs';
import { homedir } from 'node:os';
import path from 'node:path';
import { PROJECT_ROOT, stackDir } from '../../platform/config/stack-dir.js';

export { PROJECT_ROOT, type StackSecret, secretFile, stackDir } from '../../platform/config/stack-dir.js';

export const STACK_DIR = stackDir();

export const paths = {
  root: PROJECT_ROOT,
  stack: STACK_DIR,
  bin: path.join(STACK_DIR, 'bin'),
  data: path.join(STACK_DIR, 'data'),
  logs: path.join(STACK_DIR, 'logs'),
  run: path.join(STACK_DIR, 'run'),
  secrets: path.join(STACK_DIR, 'secrets'),
  cache: path.join(STACK_DIR, 'cache'),
  log: (service: string) => path.join(STACK_DIR, 'logs', `${service}.log`),
  pid: (service: string) => path.join(STACK_DIR, 'run', `${service}.pid`),
};

export function ensureDirs(): void {
  for (const d of [paths.stack, paths.bin, paths.data, paths.logs, paths.run, paths.cache]) {
    mkdirSync(d, { recursive: true });
  }
}

/**
 * Where venvs of several GB shared by every clone on the machine are kept, each named by the hash
 * of its requirements: $RODS_VENV_CACHE, else ~/.cache/rods/venvs. CI in a fresh clone finds them
 * built.
 */
export const venvCache = () =>
  process.env.RODS_VENV_CACHE ??
  path.join(process.env.XDG_CACHE_HOME ?? path.join(homedir(), '.cache'), 'rods', 'venvs');
