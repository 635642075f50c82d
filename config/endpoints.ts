// Where the three backing services live. Defaults are the local stack's loopback endpoints;
// every one is overridable by environment variable so the same code runs against clusters.
import { z } from 'zod';

export const DEFAULT_DATABASE_URL = 'postgres://rods:rods@127.0.0.1:5432/rods';
export const DEFAULT_KAFKA_BROKERS = '127.0.0.1:9092';
export const DEFAULT_TEMPORAL_ADDRESS = '127.0.0.1:7233';
export const DEFAULT_TEMPORAL_NAMESPACE = 'default';

const hostPort = z.string().regex(/^[A-Za-z0-9_.\-[\]:]+:\d{1,5}$/, 'expected host:port');

const EnvSchema = z.object({
  DATABASE_URL: z
    .string()
    .default(DEFAULT_DATABASE_URL)
    .refine((v) => /^postgres(ql)?:\/\//.test(v), 'expected a postgres:// URL'),
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
  databaseUrl: string;
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
    ['DATABASE_URL', 'KAFKA_BROKERS', 'TEMPORAL_ADDRESS', 'TEMPORAL_NAMESPACE'].map((k) => [
      k,
      env[k] === '' ? undefined : env[k],
    ]),
  );
  const parsed = EnvSchema.safeParse(picked);
  if (!parsed.success) {
    const msg = parsed.error.issues.map((i) => `${i.path.join('.')}: ${i.message}`).join('; ');
    throw new ConfigError(`invalid endpoint configuration: ${msg}`);
  }
  return {
    databaseUrl: parsed.data.DATABASE_URL,
    kafkaBrokers: parsed.data.KAFKA_BROKERS,
    temporalAddress: parsed.data.TEMPORAL_ADDRESS,
    temporalNamespace: parsed.data.TEMPORAL_NAMESPACE,
  };
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
