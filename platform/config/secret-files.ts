// Secrets mounted as files (Kubernetes and compose secrets, Docker's `*_FILE` convention): for each
// secret-bearing variable NAME, NAME_FILE names a file whose content (one trailing newline dropped)
// is NAME's value. Read once when a process starts; the value never reaches a log or a message.
import { readFileSync } from 'node:fs';
import { ConfigError } from './endpoints.js';

/** The variables that carry a secret and may come from a file. */
export const FILE_SECRETS = [
  'DATABASE_URL',
  'RODS_MIGRATE_DATABASE_URL',
  'RODS_AUDIT_HMAC_KEY',
  'RODS_GENERATOR_API_KEY',
] as const;

/**
 * Sets each NAME from NAME_FILE (in `env`, process.env by default) and returns the names set.
 * Refuses, by name, NAME and NAME_FILE both set to different values, and a file that cannot be
 * read or is empty.
 */
export function loadSecretFiles(env: NodeJS.ProcessEnv = process.env): string[] {
  const set: string[] = [];
  for (const name of FILE_SECRETS) {
    const file = env[`${name}_FILE`];
    if (!file) continue;
    let value: string;
    try {
      value = readFileSync(file, 'utf8').replace(/\r?\n$/, '');
    } catch (e) {
      throw new ConfigError(
        `${name}_FILE: cannot read ${file} (${(e as NodeJS.ErrnoException).code ?? 'error'})`,
      );
    }
    if (value.trim() === '') throw new ConfigError(`${name}_FILE: ${file} is empty`);
    // A process started by one that read the file inherits both: the same value is no conflict.
    if (env[name] && env[name] !== value)
      throw new ConfigError(`${name} and ${name}_FILE are both set; keep one`);
    env[name] = value;
    set.push(name);
  }
  return set;
}
