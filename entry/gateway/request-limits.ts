// What one token may ask of the gateway: tasks and bytes of a /batch answer, pool long-polls held
// at once, and requests per time window (@fastify/rate-limit, keyed by token). The defaults stay
// well above what the demo, the soak and the trainer simulator ask.

export interface RateLimit {
  /** Requests per window per token; 0 turns the limit off. */
  max: number;
  windowMs: number;
}

export interface GatewayLimits {
  /** Largest `n` of GET /batch. */
  maxBatchN: number;
  /** Largest /batch body: tasks past it are left out (`truncated: true`). */
  maxBatchBytes: number;
  /** Pool long-polls (wait > 0) one token may hold open at once. */
  maxLongPollsPerToken: number;
  rateLimit: RateLimit;
}

/** The largest request body by default (RODS_GATEWAY_BODY_LIMIT; 413 past it). */
export const DEFAULT_BODY_LIMIT = 8 * 1024 * 1024;

/** The schema's bound of `n` (entry/gateway/schemas.ts): the configured cap cannot exceed it. */
export const MAX_BATCH_N_LIMIT = 100_000;

export const DEFAULT_LIMITS: GatewayLimits = {
  maxBatchN: 4096,
  maxBatchBytes: 16 * 1024 * 1024,
  maxLongPollsPerToken: 32,
  rateLimit: { max: 6000, windowMs: 60_000 },
};

/** The environment variable of each limit (README, configuration). */
export const LIMIT_ENV = {
  maxBatchN: 'RODS_GATEWAY_MAX_BATCH_N',
  maxBatchBytes: 'RODS_GATEWAY_MAX_BATCH_BYTES',
  maxLongPollsPerToken: 'RODS_GATEWAY_MAX_LONG_POLLS',
  rateMax: 'RODS_GATEWAY_RATE_LIMIT',
  rateWindowS: 'RODS_GATEWAY_RATE_WINDOW_S',
} as const;

function intFromEnv(env: NodeJS.ProcessEnv, name: string, def: number, min: number, max: number): number {
  const raw = env[name]?.trim();
  if (!raw) return def;
  const n = Number(raw);
  if (!Number.isInteger(n) || n < min || n > max)
    throw new Error(`${name} must be an integer in [${min}, ${max}], got ${JSON.stringify(raw)}`);
  return n;
}

/** The limits from the environment (unset: the defaults); throws naming a bad variable. */
export function limitsFromEnv(env: NodeJS.ProcessEnv = process.env): GatewayLimits {
  const d = DEFAULT_LIMITS;
  const big = Number.MAX_SAFE_INTEGER;
  return {
    maxBatchN: intFromEnv(env, LIMIT_ENV.maxBatchN, d.maxBatchN, 1, MAX_BATCH_N_LIMIT),
    maxBatchBytes: intFromEnv(env, LIMIT_ENV.maxBatchBytes, d.maxBatchBytes, 1024, big),
    maxLongPollsPerToken: intFromEnv(env, LIMIT_ENV.maxLongPollsPerToken, d.maxLongPollsPerToken, 1, big),
    rateLimit: {
      max: intFromEnv(env, LIMIT_ENV.rateMax, d.rateLimit.max, 0, big),
      windowMs: intFromEnv(env, LIMIT_ENV.rateWindowS, d.rateLimit.windowMs / 1000, 1, 86_400) * 1000,
    },
  };
}

/** Long-polls held per key (a token's label); acquire fails at the cap. */
export class LongPolls {
  private readonly held = new Map<string, number>();
  constructor(private readonly max: number) {}

  acquire(key: string): boolean {
    const n = this.held.get(key) ?? 0;
    if (n >= this.max) return false;
    this.held.set(key, n + 1);
    return true;
  }

  release(key: string): void {
    const n = (this.held.get(key) ?? 1) - 1;
    if (n <= 0) this.held.delete(key);
    else this.held.set(key, n);
  }
}

/**
 * The first tasks of a sample that fit in maxBytes of JSON along with the envelope (at least one:
 * the cap bounds how many, a task alone is bounded where it is stored).
 */
export function fitTasks<T>(tasks: readonly T[], envelopeBytes: number, maxBytes: number): T[] {
  const sizes = new Map<T, number>();
  let total = envelopeBytes;
  let k = 0;
  for (const t of tasks) {
    let s = sizes.get(t);
    if (s === undefined) {
      s = Buffer.byteLength(JSON.stringify(t), 'utf8');
      sizes.set(t, s);
    }
    const next = total + s + (k > 0 ? 1 : 0);
    if (next > maxBytes && k > 0) break;
    total = next;
    k++;
  }
  return tasks.slice(0, k);
}
