// Client of the environment executor (executor/, a Python service on bfcl-eval): BFCL seed
// tasks and the execution of call strings in fresh environment instances. Generated call
// strings are sent as data; the executor parses them with its restricted parser and never
// evaluates them (docs/architecture.md §4, invariant 6).

import { readFileSync } from 'node:fs';
import { z } from 'zod';
import { SEED_CATEGORIES, type SeedCategory, type TaskRecord, TaskRecordSchema } from '../domain/task.js';
import { issueLines } from '../domain/validation-issues.js';
import { tlsRefusal } from '../platform/util/tls-refusal.js';

export const DEFAULT_EXECUTOR_URL = 'http://127.0.0.1:7300';

/** The executor's base URL: RODS_EXECUTOR_URL (empty counts as unset) or the local default. */
export function executorUrl(env: NodeJS.ProcessEnv = process.env): string {
  const raw = env.RODS_EXECUTOR_URL || DEFAULT_EXECUTOR_URL;
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    throw new ExecutorError(`RODS_EXECUTOR_URL is not a URL: ${raw}`, 'config');
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') {
    throw new ExecutorError(`RODS_EXECUTOR_URL must be http(s), got ${raw}`, 'config');
  }
  return url.href.replace(/\/+$/, '');
}

const Json: z.ZodType<unknown> = z.unknown();
const _Message = z.object({ role: z.string(), content: z.string() }).loose();

export const HealthSchema = z
  .object({
    ok: z.literal(true),
    bfcl_eval_version: z.string(),
    classes: z.array(z.string()),
    categories: z.record(z.string(), z.number().int()),
    python: z.string(),
    pid: z.number().int(),
  })
  .loose();
export type Health = z.infer<typeof HealthSchema>;

const SeedsResponseSchema = z.object({
  category: z.enum(SEED_CATEGORIES),
  total: z.number().int(),
  offset: z.number().int(),
  seeds: z.array(TaskRecordSchema),
});

export const FailureKindSchema = z.enum(['parse', 'unknown-function', 'execution']);
export type FailureKind = z.infer<typeof FailureKindSchema>;

export const CallResultSchema = z.object({
  call: z.string(),
  ok: z.boolean(),
  /** "Class.method" once the call parsed. */
  function: z.string().optional(),
  /** What the method returned, as JSON (absent when it raised or did not parse). */
  result: Json.optional(),
  /** The string bfcl's own executor records for this call (what its response checker compares). */
  text: z.string(),
  kind: FailureKindSchema.optional(),
  error: z.string().optional(),
});
export type CallResult = z.infer<typeof CallResultSchema>;

export const FailureSchema = z.object({
  turn: z.number().int(),
  index: z.number().int(),
  call: z.string(),
  reason: z.string(),
  kind: FailureKindSchema,
});
export type Failure = z.infer<typeof FailureSchema>;

export const TurnResultSchema = z.object({
  turn: z.number().int(),
  results: z.array(CallResultSchema),
  /** Class name -> the instance's public attributes after the turn (what bfcl's state checker compares). */
  state: z.record(z.string(), z.record(z.string(), Json)),
});
export type TurnResult = z.infer<typeof TurnResultSchema>;

export const ExecuteResponseSchema = z.object({
  ok: z.boolean(),
  failure: FailureSchema.nullable(),
  turns: z.array(TurnResultSchema),
  /** Present when the run was killed (time limit) or died: where it stopped. */
  stopped: z
    .object({ turn: z.number().int(), index: z.number().int(), call: z.string(), reason: z.string() })
    .optional(),
});
export type ExecuteResponse = z.infer<typeof ExecuteResponseSchema>;

export interface ExecuteRequest {
  involved_classes: string[];
  initial_config: Record<string, Record<string, unknown>>;
  ground_truth: string[][];
  /** Load the long-context extensions of the scenario (as bfcl does for long_context tasks). */
  long_context?: boolean;
  /** The executor's time limit for this request (capped by the server). */
  timeout_ms?: number;
}

/** `POST /evaluations/task`: one held-out task run by bfcl-eval's inference loop and checker. */
export interface EvaluateTaskRequest {
  taskId: string;
  category: SeedCategory;
  endpoint: { baseUrl: string; model: string; apiKey?: string };
  maxStepsPerTurn?: number;
  timeoutS?: number;
}

export const TaskEvaluationSchema = z.object({
  taskId: z.string(),
  category: z.enum(SEED_CATEGORIES),
  valid: z.boolean(),
  errorType: z.string().nullable(),
  error: z.string().nullable(),
  turns: z.number().int().nonnegative(),
  toolCalls: z.number().int().nonnegative(),
  promptTokens: z.number().int().nonnegative(),
  completionTokens: z.number().int().nonnegative(),
  durationMs: z.number().int().nonnegative(),
  bfclEvalVersion: z.string(),
  model: z.string(),
});
export type TaskEvaluation = z.infer<typeof TaskEvaluationSchema>;

export type ExecutorErrorCode = 'down' | 'timeout' | 'http' | 'invalid-response' | 'config';

export class ExecutorError extends Error {
  override name = 'ExecutorError';
  constructor(
    message: string,
    readonly code: ExecutorErrorCode,
    /** The HTTP status when the executor answered with an error. */
    readonly status?: number,
    readonly extra: {
      /** The executor setting that refused the request (its answer's `limit`), e.g. RODS_EXECUTOR_MAX_DEPTH. */
      limit?: string;
      /** From Retry-After: when the executor was busy (503) or asked to slow down (429). */
      retryAfterMs?: number;
    } = {},
  ) {
    super(message);
  }

  get limit(): string | undefined {
    return this.extra.limit;
  }

  get retryAfterMs(): number | undefined {
    return this.extra.retryAfterMs;
  }

  /**
   * Whether the same request may succeed later: the executor was down, slow, busy (503, 429)
   * or failed (5xx). Any other 4xx is about the request itself (malformed, over a limit) and
   * fails the same way every time.
   */
  get retryable(): boolean {
    if (this.code === 'config') return false;
    if (this.code !== 'http' || this.status === undefined) return true;
    return this.status >= 500 || this.status === 408 || this.status === 429;
  }
}

/** Retry-After in milliseconds (seconds or an HTTP date), or undefined. */
function retryAfterMs(header: string | null, now = Date.now()): number | undefined {
  if (!header) return undefined;
  const seconds = Number(header);
  if (Number.isFinite(seconds) && seconds >= 0) return seconds * 1000;
  const at = Date.parse(header);
  return Number.isNaN(at) ? undefined : Math.max(0, at - now);
}

export interface ExecutorClientOptions {
  url?: string;
  /** File holding the executor's bearer token (default RODS_EXECUTOR_TOKEN_FILE; none: no token). */
  tokenFile?: string;
  /** Per-request timeout of the HTTP exchange (ms); /execute also waits for the server's own time limit. */
  timeoutMs?: number;
}

export class ExecutorClient {
  readonly url: string;
  private readonly timeoutMs: number;
  private readonly tokenFile?: string;

  constructor(opts: ExecutorClientOptions = {}) {
    this.url = (opts.url ?? executorUrl()).replace(/\/+$/, '');
    this.timeoutMs = opts.timeoutMs ?? 30_000;
    const tokenFile = opts.tokenFile ?? (process.env.RODS_EXECUTOR_TOKEN_FILE || undefined);
    if (tokenFile) {
      this.tokenFile = tokenFile;
      this.token(); // an unreadable or empty file is refused now, not at the first call
    }
  }

  /** The token file's current content: read per request, so a rotated token needs no restart. */
  private token(): string | undefined {
    if (!this.tokenFile) return undefined;
    let t: string;
    try {
      t = readFileSync(this.tokenFile, 'utf8').trim();
    } catch (e) {
      throw new ExecutorError(
        `RODS_EXECUTOR_TOKEN_FILE: cannot read ${this.tokenFile} (${(e as NodeJS.ErrnoException).code ?? 'error'})`,
        'config',
      );
    }
    if (!t) throw new ExecutorError(`RODS_EXECUTOR_TOKEN_FILE: ${this.tokenFile} is empty`, 'config');
    return t;
  }

  async health(opts: { timeoutMs?: number } = {}): Promise<Health> {
    return this.request('GET', '/health', HealthSchema, undefined, opts.timeoutMs);
  }

  /** The first `limit` seed tasks of a BFCL multi-turn category (from `offset`). */
  async seeds(category: SeedCategory, limit = 100, offset = 0): Promise<TaskRecord[]> {
    const q = new URLSearchParams({ category, limit: String(limit), offset: String(offset) });
    const r = await this.request('GET', `/seeds?${q}`, SeedsResponseSchema);
    return r.seeds;
  }

  /** Runs the call strings turn by turn in fresh environment instances. */
  async execute(req: ExecuteRequest): Promise<ExecuteResponse> {
    // Leave the server room to report its own time limit before ours fires.
    const timeout = Math.max(this.timeoutMs, (req.timeout_ms ?? 0) + 5_000);
    return this.request('POST', '/execute', ExecuteResponseSchema, JSON.stringify(req), timeout);
  }

  /**
   * Scores one held-out task against an OpenAI-compatible endpoint with bfcl-eval's own multi-turn
   * inference and checker. An endpoint that fails answers 502 (retryable), never a wrong verdict.
   */
  async evaluateTask(req: EvaluateTaskRequest): Promise<TaskEvaluation> {
    const timeout = Math.max(this.timeoutMs, ((req.timeoutS ?? 600) + 30) * 1000);
    return this.request('POST', '/evaluations/task', TaskEvaluationSchema, JSON.stringify(req), timeout);
  }

  /** Sends a raw body to /execute (for callers that already hold serialized JSON). */
  async executeRaw(body: string): Promise<ExecuteResponse> {
    return this.request('POST', '/execute', ExecuteResponseSchema, body);
  }

  private async request<T>(
    method: 'GET' | 'POST',
    path: string,
    schema: z.ZodType<T>,
    body?: string,
    timeoutMs = this.timeoutMs,
  ): Promise<T> {
    const where = `${method} ${this.url}${path.split('?')[0]}`;
    const token = this.token();
    const headers: Record<string, string> = {
      ...(body !== undefined ? { 'content-type': 'application/json' } : {}),
      ...(token ? { authorization: `Bearer ${token}` } : {}),
    };
    let res: Response;
    try {
      res = await fetch(`${this.url}${path}`, {
        method,
        headers,
        ...(body !== undefined ? { body } : {}),
        signal: AbortSignal.timeout(timeoutMs),
      });
    } catch (e) {
      const err = e as Error & { cause?: { code?: string; message?: string } };
      if (err.name === 'TimeoutError' || err.name === 'AbortError') {
        throw new ExecutorError(`${where}: no answer within ${timeoutMs} ms`, 'timeout');
      }
      const cause = err.cause?.code ?? err.cause?.message ?? err.message;
      const refused = tlsRefusal(err.cause ?? err);
      if (refused)
        throw new ExecutorError(
          `the environment executor at ${this.url} refused the TLS connection (${cause}): ${refused}; Node takes a private CA from NODE_EXTRA_CA_CERTS`,
          'down',
        );
      throw new ExecutorError(
        `the environment executor at ${this.url} is not reachable (${cause}); start it with \`npm run stack:up\` or set RODS_EXECUTOR_URL`,
        'down',
      );
    }
    const text = await res.text();
    const retryAfter = retryAfterMs(res.headers.get('retry-after'));
    const later = retryAfter !== undefined ? { retryAfterMs: retryAfter } : {};
    let json: unknown;
    try {
      json = JSON.parse(text);
    } catch {
      throw new ExecutorError(
        `${where}: HTTP ${res.status} with a body that is not JSON: ${text.slice(0, 200)}`,
        res.ok ? 'invalid-response' : 'http',
        res.status,
        later,
      );
    }
    if (!res.ok) {
      const { error: message, limit } = (json ?? {}) as { error?: unknown; limit?: unknown };
      throw new ExecutorError(
        `${where}: HTTP ${res.status}: ${typeof message === 'string' ? message : text.slice(0, 200)}`,
        'http',
        res.status,
        { ...(typeof limit === 'string' ? { limit } : {}), ...later },
      );
    }
    const parsed = schema.safeParse(json);
    if (!parsed.success) {
      const issues = issueLines(parsed.error, 3).join('; ');
      throw new ExecutorError(`${where}: unexpected response shape: ${issues}`, 'invalid-response');
    }
    return parsed.data;
  }
}
