// chatJson: one JSON-producing call of an OpenAI-compatible chat-completions endpoint (vLLM in
// production). Transient failures are retried with exponential backoff and jitter; a reply that
// is not schema-valid JSON is re-asked, then refused with GeneratorOutputError (raw text and
// issues kept for audit). A request that does not fit the model's context length is neither
// retried nor re-asked. Replies are data: parsed with JSON.parse and zod, never evaluated.
// Independent of Temporal: an activity passes its heartbeat and cancellation signal in.
import OpenAI from 'openai';
import pino from 'pino';
import { z } from 'zod';
import { issueLines } from '../../domain/validation-issues.js';
import type { GeneratorConfig, StructuredOutputMode } from './config.js';
import {
  GeneratorOutputError,
  GeneratorRequestError,
  GeneratorUnavailableError,
  isContextLengthRefusal,
  type OutputAttempt,
} from './errors.js';
import { hashValue, parseJsonReply } from './json.js';

/** The endpoint as messages (recorded in histories and events) may name it: its name and origin, never credentials in the URL. */
export function describeEndpoint(cfg: Pick<GeneratorConfig, 'baseUrl' | 'endpoint'>): string {
  let origin = 'an invalid URL';
  try {
    origin = new URL(cfg.baseUrl).origin;
  } catch {
    /* keep the placeholder */
  }
  return cfg.endpoint ? `endpoint ${JSON.stringify(cfg.endpoint)} (${origin})` : `at ${origin}`;
}

export interface ChatMessage {
  role: 'system' | 'user' | 'assistant';
  content: string;
}

export interface ChatJsonOptions {
  /** Called at the start, every heartbeatIntervalMs while waiting, and before each retry. */
  heartbeat?: () => void;
  /** Cancels the call (the request in flight and any backoff wait); the abort reason is thrown. */
  signal?: AbortSignal;
  /** Sampling seed sent to the endpoint (vLLM honours it). */
  seed?: number;
  /** Prompt version hash to carry into the result (the stage functions set it). */
  promptHash?: string;
  /** Overrides the model (default: cfg.judgeModel for stage 'judge', else cfg.model). */
  model?: string;
  /** JSON Schema sent as response_format (default: derived from the zod schema). */
  jsonSchema?: Record<string, unknown>;
  /** Random source of the backoff jitter, in [0, 1) (tests). */
  random?: () => number;
}

export interface ChatJsonResult<T> {
  /** The validated value. */
  value: T;
  /** The accepted reply text, verbatim. */
  raw: string;
  /** The model that answered (as the endpoint reports it). */
  model: string;
  promptHash?: string;
  /** SHA-256 (hex) of the value's canonical JSON. */
  outputHash: string;
  /** Answers requested until one was valid (1 = the first). */
  attempts: number;
  /** HTTP requests made, transient failures included. */
  requests: number;
  /** Refused answers before the accepted one (for audit). */
  refused: OutputAttempt[];
  /** Total backoff waited before transient retries (ms, as computed, not measured). */
  backoffMs: number;
  /**
   * Tokens the answered requests used (the OpenAI `usage` field, summed over the refused answers
   * and the accepted one); null when the server reported none.
   */
  usage: { promptTokens: number; completionTokens: number } | null;
}

/**
 * The JSON Schema of a zod schema as response_format wants it (refinements are checked by zod
 * only). `$schema` and the redundant `propertyNames: {type: "string"}` are left out: some guided
 * decoding backends of vLLM refuse keywords they do not implement.
 */
export function jsonSchemaOf(schema: z.ZodType): Record<string, unknown> {
  const js = z.toJSONSchema(schema, { unrepresentable: 'any', io: 'output' }) as Record<string, unknown>;
  delete js.$schema;
  return simplify(js) as Record<string, unknown>;
}

function simplify(node: unknown, inProperties = false): unknown {
  if (Array.isArray(node)) return node.map((n) => simplify(n));
  if (!node || typeof node !== 'object') return node;
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(node)) {
    const stringKeys =
      !inProperties &&
      k === 'propertyNames' &&
      v !== null &&
      typeof v === 'object' &&
      Object.keys(v).length === 1 &&
      (v as { type?: unknown }).type === 'string';
    if (!stringKeys) out[k] = simplify(v, !inProperties && (k === 'properties' || k === '$defs'));
  }
  return out;
}

const log = pino(
  { level: process.env.RODS_LOG_LEVEL ?? 'info', base: { component: 'generator-client' } },
  pino.destination(2),
);

// A server may refuse a structured-output mode (vLLM with a forced xgrammar backend answers 400
// to a JSON schema using `pattern` or `minItems`): the client steps down to a simpler mode, whose
// answers zod still validates, and remembers it per endpoint and model, saying so once.
const FALLBACK: Record<StructuredOutputMode, StructuredOutputMode | undefined> = {
  json_schema: 'json_object',
  json_object: 'none',
  none: undefined,
};
const steppedDown = new Map<string, StructuredOutputMode>();

/** The structured-output mode in use for an endpoint and model (after any step down). */
export function structuredOutputMode(cfg: GeneratorConfig, model: string): StructuredOutputMode {
  return steppedDown.get(`${cfg.baseUrl}|${model}`) ?? cfg.structuredOutput;
}

/**
 * The time limit of one request: timeoutMs when configured; else 120 s, or longer when max_tokens
 * at the slowest expected decoding speed needs it (4,096 tokens at a loaded server's 20 tokens/s
 * take 205 s).
 */
export function requestTimeoutMs(
  cfg: Pick<GeneratorConfig, 'timeoutMs' | 'maxTokens' | 'minTokensPerSecond'>,
): number {
  return cfg.timeoutMs ?? Math.max(120_000, Math.ceil((cfg.maxTokens / cfg.minTokensPerSecond) * 1000));
}

/** Reasoning a model put before its answer inline, as <think>…</think> (no reasoning parser). */
const THINK = /^\s*<think>[\s\S]*?<\/think>\s*/;

const clients = new WeakMap<GeneratorConfig, OpenAI>();

function clientFor(cfg: GeneratorConfig): OpenAI {
  let c = clients.get(cfg);
  if (!c) {
    c = new OpenAI({
      baseURL: cfg.baseUrl,
      apiKey: cfg.apiKey,
      maxRetries: 0, // retries are ours: classified, heartbeating, cancellable
      timeout: requestTimeoutMs(cfg),
      defaultHeaders: cfg.headers,
    });
    clients.set(cfg, c);
  }
  return c;
}

type Transient = { transient: true; reason: string; status?: number; retryAfterMs?: number };

function abortError(signal: AbortSignal): unknown {
  return signal.reason ?? new DOMException('The operation was aborted', 'AbortError');
}

/** Classifies a failed request: transient (retry), or throws the error callers should see. */
function classify(e: unknown, signal?: AbortSignal): Transient {
  if (signal?.aborted) throw abortError(signal);
  if (e instanceof OpenAI.APIConnectionTimeoutError) return { transient: true, reason: 'timed out' };
  if (e instanceof OpenAI.APIUserAbortError) throw e;
  if (e instanceof OpenAI.APIConnectionError) {
    // fetch's TypeError("fetch failed") holds the socket's error (ECONNREFUSED, ENOTFOUND, "bad
    // port") as its cause.
    type Cause = { code?: string; message?: string; cause?: Cause };
    const cause = (e as { cause?: Cause }).cause;
    const why = cause?.code ?? cause?.cause?.code ?? cause?.cause?.message ?? cause?.message ?? e.message;
    return { transient: true, reason: `connection failed (${why})` };
  }
  if (e instanceof OpenAI.APIError) {
    const status = e.status;
    if (status === 429 || status === 408 || status === 409 || (status !== undefined && status >= 500)) {
      return { transient: true, reason: `HTTP ${status}`, status, retryAfterMs: retryAfter(e.headers) };
    }
    throw new GeneratorRequestError(
      `the generator refused the request: HTTP ${status}: ${e.message}`,
      status,
      {
        cause: e,
      },
    );
  }
  throw e;
}

function retryAfter(headers: Headers | undefined): number | undefined {
  const ms = Number(headers?.get('retry-after-ms'));
  if (Number.isFinite(ms) && ms >= 0 && headers?.get('retry-after-ms')) return ms;
  const raw = headers?.get('retry-after');
  if (!raw) return undefined;
  const s = Number(raw);
  if (Number.isFinite(s)) return Math.max(0, s * 1000);
  const date = Date.parse(raw);
  return Number.isFinite(date) ? Math.max(0, date - Date.now()) : undefined;
}

function sleep(
  ms: number,
  signal: AbortSignal | undefined,
  heartbeat: (() => void) | undefined,
  beatMs: number,
) {
  return new Promise<void>((resolve, reject) => {
    if (signal?.aborted) return reject(abortError(signal));
    const beat = heartbeat ? setInterval(heartbeat, beatMs) : undefined;
    const done = () => {
      clearTimeout(timer);
      if (beat) clearInterval(beat);
      signal?.removeEventListener('abort', onAbort);
    };
    const onAbort = () => {
      done();
      reject(abortError(signal!));
    };
    const timer = setTimeout(() => {
      done();
      resolve();
    }, ms);
    signal?.addEventListener('abort', onAbort, { once: true });
  });
}

/**
 * The models the endpoint serves (GET /models), through the client the stages use; a failure is
 * classified as chatJson's are (no retries): GeneratorUnavailableError or GeneratorRequestError.
 */
export async function listModels(
  cfg: GeneratorConfig,
  opts: { signal?: AbortSignal } = {},
): Promise<string[]> {
  try {
    const page = await clientFor(cfg).models.list({ signal: opts.signal, timeout: requestTimeoutMs(cfg) });
    return page.data.map((m) => m.id);
  } catch (e) {
    const t = classify(e, opts.signal);
    throw new GeneratorUnavailableError(
      `the generator ${describeEndpoint(cfg)} is unavailable: ${t.reason} (listing its models)`,
      1,
      t.status,
      { cause: e },
    );
  }
}

/** The tokens counted so far, as results and errors carry them (null: the server reported none). */
const usageOf = (t: { prompt: number; completion: number; reported: boolean }) =>
  t.reported ? { promptTokens: t.prompt, completionTokens: t.completion } : null;

const feedback = (issues: string[]): string =>
  `Your previous answer could not be used:\n- ${issues.slice(0, 8).join('\n- ')}\n` +
  'Answer again with exactly one JSON object that matches the requested schema, and nothing else.';

/**
 * Asks the generator for JSON matching `schema`. `stage` selects the model (judge → judgeModel)
 * and names the response_format schema.
 */
export async function chatJson<S extends z.ZodType>(
  stage: string,
  messages: ChatMessage[],
  schema: S,
  cfg: GeneratorConfig,
  opts: ChatJsonOptions = {},
): Promise<ChatJsonResult<z.output<S>>> {
  const model = opts.model ?? (stage === 'judge' ? cfg.judgeModel : cfg.model);
  const random = opts.random ?? Math.random;
  const client = clientFor(cfg);
  const modeKey = `${cfg.baseUrl}|${model}`;
  let mode = structuredOutputMode(cfg, model);
  const responseFormat = () =>
    mode === 'json_schema'
      ? {
          type: 'json_schema' as const,
          json_schema: {
            name: `rods_${stage.replace(/[^A-Za-z0-9_-]/g, '_')}`,
            schema: opts.jsonSchema ?? jsonSchemaOf(schema),
          },
        }
      : mode === 'json_object'
        ? { type: 'json_object' as const }
        : undefined;
  const timeout = requestTimeoutMs(cfg);

  const beat = opts.heartbeat;
  beat?.();
  const ticker = beat ? setInterval(beat, cfg.heartbeatIntervalMs) : undefined;
  let requests = 0;
  let transientFailures = 0;
  let backoffMs = 0;
  const refused: OutputAttempt[] = [];
  const tokens = { prompt: 0, completion: 0, reported: false };
  let conversation = messages;
  try {
    for (let attempt = 1; attempt <= cfg.maxAttempts; attempt++) {
      let completion: OpenAI.Chat.Completions.ChatCompletion;
      for (;;) {
        if (opts.signal?.aborted) throw abortError(opts.signal);
        requests++;
        try {
          const format = responseFormat();
          completion = await client.chat.completions.create(
            {
              ...cfg.extraBody,
              model,
              messages: conversation,
              temperature: cfg.temperature,
              top_p: cfg.topP,
              // vLLM's OpenAI server deprecates `max_tokens` for `max_completion_tokens`.
              max_completion_tokens: cfg.maxTokens,
              ...(opts.seed !== undefined ? { seed: opts.seed } : {}),
              ...(format ? { response_format: format } : {}),
              stream: false,
            },
            { signal: opts.signal, timeout },
          );
          break;
        } catch (e) {
          if (e instanceof OpenAI.APIError && isContextLengthRefusal(e.status, e.message)) {
            // Not the structured-output mode (no step down) nor transient (no retry): the same
            // request is refused alike every time.
            const said = e.message.replace(/^\d{3}\s+/, '');
            const last = refused.at(-1);
            if (!last)
              throw new GeneratorRequestError(
                `the generator ${describeEndpoint(cfg)} refused stage ${stage}: the request does not fit the model's context length ` +
                  `(its prompt plus max_completion_tokens ${cfg.maxTokens}); shorten the prompt or lower generator.maxTokens. The server said: ${said}`,
                e.status,
                { cause: e, reason: 'context-length' },
              );
            // A re-ask carries the refused answer: when that no longer fits, the stage ends with
            // the answers refused so far and what they cost.
            last.issues.push(`re-asking with this answer does not fit the model's context length (${said})`);
            throw new GeneratorOutputError(stage, model, refused, usageOf(tokens), opts.promptHash);
          }
          const simpler = FALLBACK[mode];
          if (e instanceof OpenAI.APIError && e.status === 400 && simpler && !opts.signal?.aborted) {
            // Refused as asked: the same request in a simpler mode. Remembered only once a simpler
            // mode is answered: a request refused for another reason is refused in every mode and
            // surfaces as GeneratorRequestError.
            mode = simpler;
            continue;
          }
          const t = classify(e, opts.signal);
          transientFailures++;
          if (transientFailures > cfg.transientRetries) {
            throw new GeneratorUnavailableError(
              `the generator ${describeEndpoint(cfg)} is unavailable for stage ${stage}: ${t.reason} ` +
                `(${requests} request(s), ${transientFailures} transient failure(s))`,
              requests,
              t.status,
              { cause: e },
            );
          }
          const exp = Math.min(cfg.backoffMaxMs, cfg.backoffBaseMs * 2 ** (transientFailures - 1));
          let delay = exp / 2 + random() * (exp / 2);
          if (t.retryAfterMs !== undefined)
            delay = Math.max(delay, Math.min(t.retryAfterMs, cfg.retryAfterCapMs));
          backoffMs += delay;
          beat?.();
          await sleep(delay, opts.signal, beat, cfg.heartbeatIntervalMs);
        }
      }
      if (mode !== structuredOutputMode(cfg, model)) {
        log.warn(
          { endpoint: describeEndpoint(cfg), model, from: structuredOutputMode(cfg, model), to: mode, stage },
          `the generator refused structured output ${structuredOutputMode(cfg, model)}; using ${mode} with client-side validation from now on`,
        );
        steppedDown.set(modeKey, mode);
      }
      if (completion.usage) {
        tokens.reported = true;
        tokens.prompt += completion.usage.prompt_tokens ?? 0;
        tokens.completion += completion.usage.completion_tokens ?? 0;
      }
      const choice = completion.choices[0];
      // A reasoning model's thinking is not the answer: vLLM's reasoning parser returns it apart
      // (`reasoning`; `reasoning_content` before vLLM removed it in January 2026, still read for
      // older servers); without a parser it comes inline in <think> tags before the JSON.
      const message = choice?.message as
        | { content?: string | null; reasoning?: string | null; reasoning_content?: string | null }
        | undefined;
      const reasoning = message?.reasoning ?? message?.reasoning_content ?? '';
      const raw = (message?.content ?? '').replace(THINK, '');
      const issues: string[] = [];
      let value: z.output<S> | undefined;
      // vLLM lowers max_completion_tokens to what the model's context length leaves after the
      // prompt: an answer cut off before it was cut off there, and a re-ask (longer) cannot fit.
      const generated = completion.usage?.completion_tokens;
      const thoughtOnly = raw.trim() === '' && reasoning !== '';
      const contextFull =
        choice?.finish_reason === 'length' &&
        !thoughtOnly &&
        generated !== undefined &&
        generated < cfg.maxTokens;
      if (contextFull) {
        issues.push(
          `the answer was cut off at the model's context length after ${generated} of max_completion_tokens (${cfg.maxTokens}): ` +
            `the prompt's ${completion.usage?.prompt_tokens} tokens left no more room; shorten the prompt or lower generator.maxTokens`,
        );
      } else if (choice?.finish_reason === 'length') {
        issues.push(
          thoughtOnly
            ? `the model spent max_completion_tokens (${cfg.maxTokens}) reasoning and gave no answer; raise maxTokens or turn thinking off (extraBody chat_template_kwargs)`
            : `the answer was cut off at max_completion_tokens (${cfg.maxTokens})`,
        );
      } else {
        const parsed = parseJsonReply(raw);
        if (!parsed.ok) issues.push(parsed.error);
        else {
          const checked = schema.safeParse(parsed.value);
          if (checked.success) value = checked.data;
          else issues.push(...issueLines(checked.error));
        }
      }
      if (value !== undefined && issues.length === 0) {
        return {
          value,
          raw,
          model: completion.model || model,
          promptHash: opts.promptHash,
          outputHash: hashValue(value),
          attempts: attempt,
          requests,
          refused,
          backoffMs,
          usage: usageOf(tokens),
        };
      }
      refused.push({ raw, issues });
      if (contextFull) break;
      // Re-ask with the refused answer and what was wrong with it (only the latest exchange).
      conversation = [
        ...messages,
        { role: 'assistant', content: raw },
        { role: 'user', content: feedback(issues) },
      ];
    }
    throw new GeneratorOutputError(stage, model, refused, usageOf(tokens), opts.promptHash);
  } finally {
    if (ticker) clearInterval(ticker);
  }
}
