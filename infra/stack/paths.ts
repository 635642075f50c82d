// Where the local stack keeps its cached artifacts, data, logs and pid files. Everything
// lives under one ignored folder (.stack/ by default) so a clean checkout rebuilds it.
import { mkdirSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

export const PROJECT_ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
export const STACK_DIR = stackDir();

/** The stack folder for an environment (RODS_STACK_DIR, default .stack/ in the checkout). */
export function stackDir(env: NodeJS.ProcessEnv = process.env): string {
  return path.resolve(env.RODS_STACK_DIR || path.join(PROJECT_ROOT, '.stack'));
}

/**
 * The stack's database passwords, one file each (mode 0600, folder 0700), made at the first
 * `stack up`: `app` for the application role, `owner` for the role that owns the tables and
 * runs the migrations, `superuser` for the server's `postgres` role.
 */
export type StackSecret = 'app' | 'owner' | 'superuser';
export function secretFile(name: StackSecret, env: NodeJS.ProcessEnv = process.env): string {
  return path.join(stackDir(env), 'secrets', `postgres-${name}.password`);
}

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
