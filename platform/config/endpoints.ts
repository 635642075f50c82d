// Where the three backing services live. Defaults are the local stack's loopback endpoints;
// every one is overridable by environment variable so the same code runs against clusters.
import { readFileSync } from 'node:fs';
import { z } from 'zod';
import { issueLines } from '../../domain/validation-issues.js';
import { secretFile } from './stack-dir.js';

/** The local stack's database, before `stack up` has made its passwords (.stack/secrets). */
export const DEFAULT_DATABASE_URL = 'postgres://rods:rods@127.0.0.1:5432/rods';
export const DEFAULT_DB_PASSWORD = 'rods';
/** The role that owns the tables and runs the migrations on the local stack. */
export const STACK_OWNER_ROLE = 'rods_owner';
export const DEFAULT_KAFKA_BROKERS = '127.0.0.1:9092';
export const DEFAULT_TEMPORAL_ADDRESS = '127.0.0.1:7233';
export const DEFAULT_TEMPORAL_NAMESPACE = 'default';

const hostPort = z.string().regex(/^[A-Za-z0-9_.\-[\]:]+:\d{1,5}$/, 'expected host:port');

const EnvSchema = z.object({
  DATABASE_URL: z.string().refine((v) => /^postgres(ql)?:\/\//.test(v), 'expected a postgres:// URL'),
  RODS_MIGRATE_DATABASE_URL: z
    .string()
    .refine((v) => /^postgres(ql)?:\/\//.test(v), 'expected a postgres:// URL')
    .optional(),
  KAFKA_BROKERS: z
    .string()
    .default(DEFAULT_KAFKA_BROKERS)
    .transform((v) =>
      v
        .split(',')
        .map((s) => s.trim())
        .filter(Boolean),
    )
    .pipe(z.array(hostPort).min(1, 'at least one broker')),
  TEMPORAL_ADDRESS: hostPort.default(DEFAULT_TEMPORAL_ADDRESS),
  TEMPORAL_NAMESPACE: z.string().min(1).default(DEFAULT_TEMPORAL_NAMESPACE),
});

export interface Endpoints {
  /** The application's role: reads and appends events, writes projections. */
  databaseUrl: string;
  /**
   * The role that owns the tables and runs the migrations (RODS_MIGRATE_DATABASE_URL; on the
   * local stack, its owner role when DATABASE_URL is unset). Absent: migrations are not run
   * by this process, only checked.
   */
  ownerDatabaseUrl?: string;
  kafkaBrokers: string[];
  temporalAddress: string;
  temporalNamespace: string;
}

export class ConfigError extends Error {
  override name = 'ConfigError';
}

/** Reads the endpoints from the environment (empty strings count as unset). */
export function loadEndpoints(env: NodeJS.ProcessEnv = process.env): Endpoints {
  const picked = Object.fromEntries(
    [
      'DATABASE_URL',
      'RODS_MIGRATE_DATABASE_URL',
      'KAFKA_BROKERS',
      'TEMPORAL_ADDRESS',
      'TEMPORAL_NAMESPACE',
    ].map((k) => [k, env[k] === '' ? undefined : env[k]]),
  );
  const stackDefault = picked.DATABASE_URL === undefined;
  picked.DATABASE_URL ??= stackDatabaseUrl('app', env) ?? DEFAULT_DATABASE_URL;
  if (picked.RODS_MIGRATE_DATABASE_URL === undefined && stackDefault) {
    picked.RODS_MIGRATE_DATABASE_URL = stackDatabaseUrl('owner', env);
  }
  const parsed = EnvSchema.safeParse(picked);
  if (!parsed.success) {
    const msg = issueLines(parsed.error).join('; ');
    throw new ConfigError(`invalid endpoint configuration: ${msg}`);
  }
  refuseDefaultPassword('DATABASE_URL', parsed.data.DATABASE_URL, env);
  if (parsed.data.RODS_MIGRATE_DATABASE_URL)
    refuseDefaultPassword('RODS_MIGRATE_DATABASE_URL', parsed.data.RODS_MIGRATE_DATABASE_URL, env);
  return {
    databaseUrl: parsed.data.DATABASE_URL,
    ...(parsed.data.RODS_MIGRATE_DATABASE_URL
      ? { ownerDatabaseUrl: parsed.data.RODS_MIGRATE_DATABASE_URL }
      : {}),
    kafkaBrokers: parsed.data.KAFKA_BROKERS,
    temporalAddress: parsed.data.TEMPORAL_ADDRESS,
    temporalNamespace: parsed.data.TEMPORAL_NAMESPACE,
  };
}

/** A password of the local stack (.stack/secrets), or undefined before the stack made it. */
export function readStackSecret(
  name: 'app' | 'owner' | 'superuser',
  env: NodeJS.ProcessEnv = process.env,
): string | undefined {
  try {
    return readFileSync(secretFile(name, env), 'utf8').trim() || undefined;
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw new ConfigError(`cannot read ${secretFile(name, env)}: ${(e as Error).message}`);
  }
}

/** The local stack's URL for its app or owner role, when the stack has made that password. */
function stackDatabaseUrl(role: 'app' | 'owner', env: NodeJS.ProcessEnv): string | undefined {
  const pw = readStackSecret(role, env);
  if (pw === undefined) return undefined;
  const url = new URL(DEFAULT_DATABASE_URL);
  url.username = role === 'app' ? 'rods' : STACK_OWNER_ROLE;
  url.password = pw;
  return url.toString();
}

// The well-known password is only for the local stack: anywhere else it is an open door.
function refuseDefaultPassword(name: string, value: string, env: NodeJS.ProcessEnv): void {
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    throw new ConfigError(`invalid endpoint configuration: ${name}: not a URL`);
  }
  const host = url.hostname.replace(/^\[(.*)\]$/, '$1');
  if (decodeURIComponent(url.password) !== DEFAULT_DB_PASSWORD || isLoopback(host) || host === '') return;
  if (env.RODS_ALLOW_DEFAULT_DB_PASSWORD === '1') return;
  throw new ConfigError(
    `${name} uses the default password '${DEFAULT_DB_PASSWORD}' for the non-loopback host ${host}: set a real password (or RODS_ALLOW_DEFAULT_DB_PASSWORD=1 to allow it)`,
  );
}

/** Splits "host:port" (IPv6 in brackets allowed). */
export function splitHostPort(address: string): { host: string; port: number } {
  const i = address.lastIndexOf(':');
  const host = address.slice(0, i).replace(/^\[(.*)\]$/, '$1');
  return { host, port: Number(address.slice(i + 1)) };
}

export function isLoopback(host: string): boolean {
  return host === 'localhost' || host === '::1' || /^127\./.test(host);
}

/** The endpoints as they may be shown: every database URL's password replaced by `***`. */
export function shownEndpoints(ep: Endpoints): Endpoints {
  const hide = (u: string) => {
    try {
      const url = new URL(u);
      if (url.password) url.password = '***';
      return url.toString();
    } catch {
      return '(unparseable URL)';
    }
  };
  return {
    ...ep,
    databaseUrl: hide(ep.databaseUrl),
    ...(ep.ownerDatabaseUrl ? { ownerDatabaseUrl: hide(ep.ownerDatabaseUrl) } : {}),
  };
}
