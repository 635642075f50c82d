// Where the local stack keeps its data and secrets (RODS_STACK_DIR, default .stack/ in the
// checkout). The endpoints read the stack's password files from here; the stack manager
// (infra/stack/) makes them. Defined here so the product's config does not import the manager.
import path from 'node:path';
import { fileURLToPath } from 'node:url';

export const PROJECT_ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');

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
