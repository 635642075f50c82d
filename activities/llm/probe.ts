// The generator check of `rods doctor`: one small structured request to an operator's endpoint,
// through the client the synthesis stages use (chatJson, with the endpoint's URL, key and headers
// as the worker resolves them), bounded by one deadline. It reports the endpoint (name, URL
// without credentials, model), the outcome, the latency, whether the answer matched the schema,
// the tokens used, and on failure the client's classification. The API key and header values
// never appear in what it returns, even when the server echoes them in an error.
import OpenAI from 'openai';
import { z } from 'zod';
import { chatJson, listModels } from './client.js';
import { type GeneratorConfig, generatorConfig } from './config.js';
import type { GeneratorEndpoint } from './endpoints.js';
import { GeneratorOutputError, GeneratorRequestError, GeneratorUnavailableError } from './errors.js';

/** The probe's prompt: the stage marker lets the stand-in generator answer it like a stage. */
export const PROBE_PROMPT =
  '[rods-stage: doctor v1]\nYou are probed by `rods doctor`. Answer with exactly one JSON object, {"ok": true}, and nothing else.';
export const ProbeAnswerSchema = z.strictObject({ ok: z.boolean() });
/** Enough for {"ok": true} with any tokenizer and some whitespace; small enough to be quick on a CPU. */
export const PROBE_MAX_TOKENS = 64;
/**
 * A cold vLLM on a CPU takes 10 s and more for its first request (a loaded GPU server answers a
 * 64-token request in well under a second): 30 s tells a slow server from a dead one and still
 * bounds the doctor run.
 */
export const DEFAULT_PROBE_TIMEOUT_MS = 30_000;

/** ok: it answered schema-valid JSON; warn: it answered, but not usably; fail: it cannot serve the stages. */
export type ProbeStatus = 'ok' | 'warn' | 'fail';
export type ProbeReason =
  | 'unreachable'
  | 'timed-out'
  | 'unavailable'
  | 'busy'
  | 'auth'
  | 'refused'
  | 'non-conforming'
  | 'cut-off'
  | 'no-model'
  | 'error';

export interface GeneratorProbe {
  endpoint: { name: string; baseUrl: string; model: string | null; modelFrom: 'flag' | 'endpoint' | null };
  status: ProbeStatus;
  ms: number;
  /** Whether the answer was JSON matching the schema; null when there was no answer. */
  conformed: boolean | null;
  usage: { promptTokens: number; completionTokens: number } | null;
  /** Why it is not ok, and the client's error class behind it. */
  reason?: ProbeReason;
  error?: string;
  detail: string;
}

export interface ProbeOptions {
  /** Model to ask; unset: the first the endpoint lists (vLLM serves one). */
  model?: string;
  timeoutMs?: number;
  /**
   * False when the endpoint is the built-in default (nothing configured): a process that needs no
   * generator (gateway, aggregator) runs there, so its absence is a warning, not a failure.
   */
  configured?: boolean;
}

/** The base URL as it may be shown: without user, password, query or fragment. */
export function shownBaseUrl(baseUrl: string): string {
  try {
    const u = new URL(baseUrl);
    u.username = '';
    u.password = '';
    u.search = '';
    u.hash = '';
    return u.toString().replace(/\/$/, '');
  } catch {
    return '(an invalid URL)';
  }
}

/** Removes every secret of the endpoint (its key, its header values) from a text. */
function redactor(ep: GeneratorEndpoint): (text: string) => string {
  const secrets = [ep.apiKey, ...Object.values(ep.headers)]
    .filter((s): s is string => typeof s === 'string' && s.length >= 4)
    .sort((a, b) => b.length - a.length);
  return (text) => secrets.reduce((t, s) => t.split(s).join('***'), text);
}

/**
 * Classifies a failed probe. A failure only when the endpoint cannot serve the stages at all:
 * unreachable, timed out, a server error (the client's GeneratorUnavailableError) or a refused key
 * (401/403). An endpoint that answers, but busy (429), refusing this request (a model it does not
 * serve: the campaign names its own), or with text that is not the schema's JSON, is a warning:
 * the stages re-ask and fall back, and the probe's model and prompt are not the campaign's.
 */
function classifyFailure(
  e: unknown,
  deadline: AbortSignal,
): Pick<GeneratorProbe, 'status' | 'reason' | 'error'> {
  const error = e instanceof Error ? e.name : typeof e;
  const cause = (e as { cause?: unknown }).cause;
  if (deadline.aborted || cause instanceof OpenAI.APIConnectionTimeoutError)
    return { status: 'fail', reason: 'timed-out', error };
  if (e instanceof GeneratorUnavailableError) {
    const s = e.lastStatus;
    if (s === 429 || s === 408 || s === 409) return { status: 'warn', reason: 'busy', error };
    return { status: 'fail', reason: s === undefined ? 'unreachable' : 'unavailable', error };
  }
  if (e instanceof GeneratorRequestError)
    return e.status === 401 || e.status === 403
      ? { status: 'fail', reason: 'auth', error }
      : { status: 'warn', reason: 'refused', error };
  if (e instanceof GeneratorOutputError)
    return {
      status: 'warn',
      reason: e.issues.some((i) => i.includes('max_completion_tokens')) ? 'cut-off' : 'non-conforming',
      error,
    };
  return { status: 'fail', reason: 'error', error };
}

const REASON_WORDS: Record<ProbeReason, string> = {
  unreachable: 'cannot be reached',
  'timed-out': 'did not answer in time',
  unavailable: 'answered with a server error',
  busy: 'is busy',
  auth: 'refused the API key',
  refused: 'refused the probe request',
  'non-conforming': 'answered, but not with JSON matching the schema',
  'cut-off': 'answered, but was cut off at the token limit',
  'no-model': 'lists no model to ask',
  error: 'failed',
};

/** Probes one endpoint with one structured request (after GET /models when no model is given). */
export async function probeGenerator(
  ep: GeneratorEndpoint,
  opts: ProbeOptions = {},
): Promise<GeneratorProbe> {
  const timeoutMs = opts.timeoutMs ?? DEFAULT_PROBE_TIMEOUT_MS;
  const redact = redactor(ep);
  const endpoint: GeneratorProbe['endpoint'] = {
    name: ep.name,
    baseUrl: shownBaseUrl(ep.baseUrl),
    model: opts.model ?? null,
    modelFrom: opts.model !== undefined ? 'flag' : null,
  };
  const where = `endpoint ${JSON.stringify(ep.name)} (${endpoint.baseUrl})`;
  const cfgFor = (model: string): GeneratorConfig =>
    generatorConfig({
      endpoint: ep.name,
      baseUrl: ep.baseUrl,
      ...(ep.apiKey !== undefined ? { apiKey: ep.apiKey } : {}),
      headers: ep.headers,
      model,
      temperature: 0,
      topP: 1,
      maxTokens: PROBE_MAX_TOKENS,
      timeoutMs,
      // One request: a doctor reports what it met, it does not wait a failure out.
      maxAttempts: 1,
      transientRetries: 0,
    });
  const deadline = AbortSignal.timeout(timeoutMs);
  const t0 = performance.now();
  const ms = () => Math.round(performance.now() - t0);
  try {
    if (endpoint.model === null) {
      const models = await listModels(cfgFor('(listing)'), { signal: deadline });
      if (models.length === 0)
        return {
          endpoint,
          status: 'warn',
          ms: ms(),
          conformed: null,
          usage: null,
          reason: 'no-model',
          detail: redact(`${where} ${REASON_WORDS['no-model']}; give one with --generator-model`),
        };
      endpoint.model = models[0]!;
      endpoint.modelFrom = 'endpoint';
    }
    const r = await chatJson(
      'doctor',
      [
        { role: 'system', content: PROBE_PROMPT },
        { role: 'user', content: 'Answer now.' },
      ],
      ProbeAnswerSchema,
      cfgFor(endpoint.model),
      { signal: deadline, seed: 0 },
    );
    const tokens = r.usage
      ? `; ${r.usage.promptTokens} prompt + ${r.usage.completionTokens} completion tokens`
      : '';
    return {
      endpoint,
      status: 'ok',
      ms: ms(),
      conformed: true,
      usage: r.usage,
      detail: redact(`${where}, model ${endpoint.model}: answered JSON matching the schema${tokens}`),
    };
  } catch (e) {
    const c = classifyFailure(e, deadline);
    const output = e instanceof GeneratorOutputError;
    // The client's message names the endpoint again: kept from "is unavailable: " on.
    const message =
      c.reason === 'timed-out'
        ? `no answer within ${timeoutMs} ms`
        : (e as Error).message.replace(/^the generator .*? is unavailable(?: for stage doctor)?: /, '');
    let status = c.status;
    let detail = `${where}${endpoint.model ? `, model ${endpoint.model}` : ''} ${REASON_WORDS[c.reason!]}: ${message}`;
    if (status === 'fail' && opts.configured === false) {
      status = 'warn';
      detail = `no generator configured (RODS_GENERATOR_BASE_URL, RODS_GENERATOR_ENDPOINTS_FILE); the built-in default ${detail}`;
    }
    return {
      endpoint,
      status,
      ms: ms(),
      conformed: output ? false : null,
      usage: output ? e.usage : null,
      reason: c.reason,
      error: c.error,
      detail: redact(detail),
    };
  }
}
