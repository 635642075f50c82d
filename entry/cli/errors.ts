import { DEFAULT_EXECUTOR_URL } from '../../activities/executor-client.js';
import { BUILTIN_DEFAULT_BASE_URL } from '../../activities/llm/endpoints.js';
import {
  DEFAULT_KAFKA_BROKERS,
  DEFAULT_TEMPORAL_ADDRESS,
  loadEndpoints,
} from '../../platform/config/endpoints.js';

/** Bad input from the user (unknown id, bad flag value): the CLI prints it and exits 2. */
export class UsageError extends Error {
  override name = 'UsageError';
}

/** A backing service the CLI could not reach, as the top-level handler names it. */
export interface Unreachable {
  service: 'PostgreSQL' | 'Kafka' | 'Temporal' | 'the environment executor' | 'the generator';
  /** host:port that did not answer. */
  endpoint: string;
  /** The environment variable that sets the endpoint. */
  variable: string;
  /** The low-level reason (connect ECONNREFUSED 127.0.0.1:5432). */
  reason: string;
}

const CONNECT_CODES = /\b(ECONNREFUSED|ECONNRESET|EHOSTUNREACH|ENETUNREACH|ETIMEDOUT|ENOTFOUND|EAI_AGAIN)\b/;
// grpc-js and Temporal's core say so without an address: the only gRPC service rods dials is Temporal.
const GRPC_UNREACHABLE =
  /Failed to connect before the deadline|14 UNAVAILABLE|No connection established|tcp connect error|transport error/i;

const LOOPBACK = new Set(['127.0.0.1', 'localhost', '::1', '[::1]']);

function sameEndpoint(a: string, b: string): boolean {
  const split = (s: string) => {
    const i = s.lastIndexOf(':');
    return [s.slice(0, i).toLowerCase(), s.slice(i + 1)] as const;
  };
  const [ha, pa] = split(a);
  const [hb, pb] = split(b);
  return pa === pb && (ha === hb || (LOOPBACK.has(ha) && LOOPBACK.has(hb)));
}

function hostPort(url: string, defaultPort: string): string | undefined {
  try {
    const u = new URL(url);
    return `${u.hostname}:${u.port || defaultPort}`;
  } catch {
    return undefined;
  }
}

/** Every error of a cause chain (cause, AggregateError's errors, kafkajs's originalError). */
function chain(e: unknown, seen = new Set<unknown>()): Error[] {
  if (!e || typeof e !== 'object' || seen.has(e)) return [];
  seen.add(e);
  const x = e as Error & { cause?: unknown; errors?: unknown[]; originalError?: unknown };
  return [
    x,
    ...chain(x.cause, seen),
    ...chain(x.originalError, seen),
    ...(Array.isArray(x.errors) ? x.errors.flatMap((y) => chain(y, seen)) : []),
  ];
}

/** The endpoint a connection error names: its address and port, or `host:port` in its message. */
function failedEndpoint(errors: Error[]): { endpoint: string; reason: string } | undefined {
  for (const err of errors) {
    const x = err as Error & { code?: string; address?: string; port?: number; hostname?: string };
    if (x.code && CONNECT_CODES.test(x.code) && (x.address || x.hostname) && x.port)
      return { endpoint: `${x.address ?? x.hostname}:${x.port}`, reason: x.message };
  }
  for (const err of errors) {
    const m = new RegExp(`${CONNECT_CODES.source} (\\[?[\\w.:-]+?\\]?):(\\d+)`).exec(err.message ?? '');
    if (m) return { endpoint: `${m[2]}:${m[3]}`, reason: err.message };
  }
  return undefined;
}

/**
 * Which backing service a failure could not reach, when it is a connection failure: its endpoint
 * is matched against the configured ones (DATABASE_URL, KAFKA_BROKERS, TEMPORAL_ADDRESS,
 * RODS_EXECUTOR_URL, RODS_GENERATOR_BASE_URL).
 */
export function unreachableService(
  e: unknown,
  env: NodeJS.ProcessEnv = process.env,
): Unreachable | undefined {
  const errors = chain(e);
  // A server that answered and refused the TLS handshake is not down: its own message says why.
  if (errors.some((x) => x.name === 'TlsHandshakeError')) return undefined;
  const found = failedEndpoint(errors);
  if (!found) {
    const grpc = errors.find((x) => GRPC_UNREACHABLE.test(x.message ?? ''));
    if (!grpc) return undefined;
    return {
      service: 'Temporal',
      endpoint: env.TEMPORAL_ADDRESS || DEFAULT_TEMPORAL_ADDRESS,
      variable: 'TEMPORAL_ADDRESS',
      reason: grpc.message,
    };
  }
  let ep: ReturnType<typeof loadEndpoints> | undefined;
  try {
    ep = loadEndpoints(env);
  } catch {
    ep = undefined; // an invalid configuration is reported by whoever reads it
  }
  const candidates: [Unreachable['service'], string, string | undefined][] = [
    ['PostgreSQL', 'DATABASE_URL', ep && hostPort(ep.databaseUrl, '5432')],
    [
      'PostgreSQL',
      'RODS_MIGRATE_DATABASE_URL',
      ep?.ownerDatabaseUrl && hostPort(ep.ownerDatabaseUrl, '5432'),
    ],
    ...(ep?.kafkaBrokers ?? [DEFAULT_KAFKA_BROKERS]).map(
      (b) => ['Kafka', 'KAFKA_BROKERS', b] as [Unreachable['service'], string, string],
    ),
    ['Temporal', 'TEMPORAL_ADDRESS', ep?.temporalAddress ?? DEFAULT_TEMPORAL_ADDRESS],
    [
      'the environment executor',
      'RODS_EXECUTOR_URL',
      hostPort(env.RODS_EXECUTOR_URL || DEFAULT_EXECUTOR_URL, '80'),
    ],
    [
      'the generator',
      'RODS_GENERATOR_BASE_URL',
      hostPort(env.RODS_GENERATOR_BASE_URL || BUILTIN_DEFAULT_BASE_URL, '80'),
    ],
  ];
  const hit = candidates.find(([, , at]) => at !== undefined && sameEndpoint(at, found.endpoint));
  if (!hit) return undefined;
  return { service: hit[0], variable: hit[1], endpoint: found.endpoint, reason: found.reason };
}

/** What the CLI prints for an unreachable service: which, where, which variable, how to start it. */
export function describeUnreachable(u: Unreachable): string {
  const host = u.endpoint.slice(0, u.endpoint.lastIndexOf(':'));
  const local = LOOPBACK.has(host.toLowerCase());
  const how =
    u.service === 'the generator'
      ? local
        ? 'start vLLM (or `npm run dev -- standin-generator` for tests) there, or point RODS_GENERATOR_BASE_URL at a running one'
        : `check that it runs and is reachable from here, or point ${u.variable} at a running one`
      : local
        ? `start the local stack with \`npm run stack:up\` (\`npm run stack:status\` shows what runs), or point ${u.variable} at a running one`
        : `check that it runs and is reachable from here, or point ${u.variable} at a running one (\`npm run stack:up\` starts only loopback services)`;
  return `${u.service} does not answer at ${u.endpoint} (set by ${u.variable}): ${u.reason}\n  ${how}`;
}
