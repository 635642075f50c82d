// The stand-in generator: an OpenAI-compatible chat-completions server that replaces vLLM in
// tests and the demo (and only there). It recognises the synthesis stage by the prompt's
// `[rods-stage: …]` marker, reads the seed task or candidate from the user message's JSON, and
// answers schema-valid JSON built by deterministic rule-based edits of that real BFCL task (see
// synth.ts, mutate.ts, text.ts). Faults can be injected by flag (rates) or per request (headers).
import Fastify, { type FastifyInstance, type FastifyReply, type FastifyRequest } from 'fastify';
import { z } from 'zod';
import { FailureSchema } from '../../activities/executor-client.js';
import { canonicalJson, sha256Hex } from '../../activities/llm/json.js';
import { JudgementSchema, PlanFunctionSchema } from '../../activities/llm/schemas.js';
import { type SeedCategory, TaskRecordSchema } from '../../domain/task.js';
import { issueLines } from '../../domain/validation-issues.js';
import { parseStageMarker } from '../../platform/config/prompts.js';
import { answerAugment } from './augment.js';
import { checkSchema, instanceOf } from './json-schema.js';
import { isSeedCategory, type Policy, PolicyError } from './policy.js';
import { Rng } from './rng.js';
import { answerParams, answerPatch, answerPlan } from './synth.js';
import { answerJudge, answerRefine, answerRewrite, answerTurnQuery } from './text.js';

export const STANDIN_MODEL = 'rods-standin-generator';
export const DEFAULT_STANDIN_PORT = 7400;

export const FAULT_KINDS = [
  '5xx',
  '429',
  'timeout',
  'malformed',
  'reject',
  // Server behaviours of a real vLLM: a guided-decoding backend that refuses the request's JSON
  // schema (HTTP 400 to response_format json_schema only); a reasoning model whose thinking comes
  // apart in `reasoning` (vLLM's field since January 2026), or in `reasoning_content` (older vLLM,
  // removed by vllm-project/vllm#33402), or inline in <think> tags, or uses up the token limit
  // before any answer.
  'refuse-schema',
  'reasoning',
  'reasoning-legacy',
  'think-tags',
  'think-length',
  'none',
] as const;
export type FaultKind = (typeof FAULT_KINDS)[number];

export interface StandinOptions {
  host?: string;
  /** 0 picks a free port. */
  port?: number;
  /** Server seed: with the request it determines every answer. */
  seed?: number;
  /** Delay before every answer (ms). */
  latencyMs?: number;
  /** Share of requests answered with HTTP 503. */
  failRate?: number;
  /** Share of requests left hanging until the client gives up. */
  timeoutRate?: number;
  /** Share of requests answered with malformed JSON. */
  malformedRate?: number;
  /** Share of judge requests answered with a rejection. */
  rejectRate?: number;
  /** Share of judge answers whose verdict contradicts their own scores (as an LLM's can). */
  contradictRate?: number;
  /** Share of requests answered with HTTP 429 (Retry-After set). */
  rateLimitRate?: number;
  /** Retry-After of a 429 (ms). */
  retryAfterMs?: number;
  /** Log one line per request to stderr. */
  log?: boolean;
  /**
   * The known-answer policy (policy.ts): requests without a stage marker are answered as a
   * tool-calling model whose BFCL accuracy is known (`/v1/chat/completions`, or
   * `/policy/<category>/v1/chat/completions` to name the category of the tasks asked about).
   */
  policy?: Policy;
  /** Each policy answer waits this long first (a slow policy: a test kills a worker mid-evaluation). */
  policyDelayMs?: number;
}

export interface StandinStats {
  requests: number;
  /** Model names the requests asked for. */
  models: Record<string, number>;
  answered: number;
  byStage: Record<string, number>;
  faults: Record<string, number>;
  /**
   * Chat requests by the SHA-256 (hex) of their Authorization header ('(none)' without one): tests
   * prove which key the worker sent without the stand-in echoing it.
   */
  authorizations: Record<string, number>;
  /** Judge requests whose input carried the candidate's execution with a state per turn. */
  judgeWithStates: number;
  /** Judge answers whose verdict was turned against their scores (contradictRate). */
  contradicted: number;
  /** Requests that set the token limit by the deprecated `max_tokens` (vLLM takes `max_completion_tokens`). */
  deprecatedMaxTokens: number;
  /** Policy answers: by kind (calls, turn-done, no-calls, wrong) and the task ids asked about. */
  policy: { answers: Record<string, number>; tasks: Record<string, number> };
}

export interface StandinServer {
  /** Base URL of the OpenAI-compatible API, `http://host:port/v1`. */
  url: string;
  port: number;
  stats: StandinStats;
  app: FastifyInstance;
  close(): Promise<void>;
}

const Content = z.union([
  z.string(),
  z.array(z.object({ type: z.string(), text: z.string().optional() }).loose()),
]);
const BodySchema = z
  .object({
    model: z.string().optional(),
    messages: z.array(z.object({ role: z.string(), content: Content.nullable().optional() }).loose()).min(1),
    response_format: z
      .object({
        type: z.enum(['text', 'json_object', 'json_schema']),
        json_schema: z
          .object({ name: z.string().optional(), schema: z.record(z.string(), z.unknown()).optional() })
          .loose()
          .optional(),
      })
      .loose()
      .optional(),
    seed: z.number().int().optional(),
    stream: z.boolean().optional(),
    max_tokens: z.number().int().positive().optional(),
    max_completion_tokens: z.number().int().positive().optional(),
  })
  .loose();
type Body = z.infer<typeof BodySchema>;

const text = (c: z.infer<typeof Content> | null | undefined): string =>
  typeof c === 'string' ? c : (c ?? []).map((p) => p.text ?? '').join('');

const PlanInput = z.object({
  seed: TaskRecordSchema,
  blocklist: z.array(z.string()).optional(),
  limits: z
    .object({
      minTurns: z.number().int().min(1),
      maxTurns: z.number().int().min(1),
      minCallsPerTurn: z.number().int().min(1),
      maxCallsPerTurn: z.number().int().min(1),
    })
    .partial()
    .optional(),
});
const ParamsInput = z.object({
  plan: z.object({ functions: z.array(z.array(PlanFunctionSchema)), narrative: z.string() }),
  seed: TaskRecordSchema,
});
const PatchInput = z.object({ candidate: TaskRecordSchema, failure: FailureSchema });
const RewriteInput = z.object({
  candidate: TaskRecordSchema,
  seed: TaskRecordSchema.optional(),
  narrative: z.string().optional(),
});
const TurnQueryInput = z.object({
  involved_classes: z.array(z.string()),
  calls: z.array(z.string()).min(1),
});
const JudgeInput = z.object({ candidate: TaskRecordSchema });
const RefineInput = z.object({ candidate: TaskRecordSchema, judgement: JudgementSchema });
const AugmentInput = z.object({ kind: z.enum(['miss_func', 'miss_param']), candidate: TaskRecordSchema });

class BadRequest extends Error {}

function parseInput<T>(schema: z.ZodType<T>, input: unknown, stage: string): T {
  const r = schema.safeParse(input);
  if (!r.success) {
    const issues = issueLines(r.error, 3).join('; ');
    throw new BadRequest(
      `the ${stage} input in the user message is not what the stand-in expects: ${issues}`,
    );
  }
  return r.data;
}

/** The JSON input of the stage: the first ```json block of the first user message that has one (or a user message that is JSON). */
export function findInput(messages: Body['messages']): unknown {
  for (const m of messages) {
    if (m.role !== 'user') continue;
    const t = text(m.content);
    const block = /```json[ \t]*\r?\n([\s\S]*?)\r?\n```/.exec(t);
    const candidate = block ? block[1]! : t.trim().startsWith('{') ? t.trim() : undefined;
    if (candidate === undefined) continue;
    try {
      return JSON.parse(candidate);
    } catch {}
  }
  return undefined;
}

/** The stage answer (a JSON value) for a request; throws BadRequest when the request is not a rods stage. */
/** Whether a judge input carries an execution with every turn's state. */
function hasTurnStates(input: unknown): boolean {
  const turns = (input as { execution?: { turns?: unknown } } | null)?.execution?.turns;
  return (
    Array.isArray(turns) &&
    turns.length > 0 &&
    turns.every((t) => typeof (t as { state?: unknown }).state === 'string')
  );
}

export function answerStage(stage: string, input: unknown, rng: Rng, reject: boolean): unknown {
  switch (stage) {
    case 'plan':
      return answerPlan(parseInput(PlanInput, input, stage), rng);
    case 'params': {
      const { rules: _rules, ...out } = answerParams(parseInput(ParamsInput, input, stage), rng);
      return out;
    }
    case 'config-patch':
      return answerPatch(parseInput(PatchInput, input, stage));
    case 'rewrite':
      return answerRewrite(parseInput(RewriteInput, input, stage), rng);
    case 'turn-query':
      return answerTurnQuery(parseInput(TurnQueryInput, input, stage), rng);
    case 'judge':
      return answerJudge(parseInput(JudgeInput, input, stage), rng, reject);
    case 'refine':
      return answerRefine(parseInput(RefineInput, input, stage), rng);
    case 'augment':
      return answerAugment(parseInput(AugmentInput, input, stage));
    case 'doctor':
      // `rods doctor`'s probe (activities/llm/probe.ts): a vLLM answers any prompt.
      return { ok: true };
    default:
      throw new BadRequest(`the stand-in generator does not know the stage ${JSON.stringify(stage)}`);
  }
}

const MALFORMED: ((json: string) => string)[] = [
  (json) => json.slice(0, Math.max(1, Math.floor(json.length / 2))),
  () => 'Sure! I have prepared what you asked for. Let me know if you need anything else.',
  (json) => `${json}\nI hope this helps!`,
  (json) => json.replace(/"/g, "'"),
  () => '{"result": "ok"}',
];

function openAiError(reply: FastifyReply, status: number, message: string, type: string) {
  return reply.code(status).send({ error: { message, type, param: null, code: status } });
}

function rate(v: number | undefined, name: string): number {
  const r = v ?? 0;
  if (!(r >= 0 && r <= 1)) throw new Error(`${name} must be between 0 and 1, got ${v}`);
  return r;
}

/** Builds the stand-in's fastify app (not listening yet). */
export function buildStandin(opts: StandinOptions = {}): {
  app: FastifyInstance;
  stats: StandinStats;
  releaseHanging(): void;
} {
  const serverSeed = opts.seed ?? 0;
  const rates = {
    fail: rate(opts.failRate, 'failRate'),
    timeout: rate(opts.timeoutRate, 'timeoutRate'),
    malformed: rate(opts.malformedRate, 'malformedRate'),
    reject: rate(opts.rejectRate, 'rejectRate'),
    contradict: rate(opts.contradictRate, 'contradictRate'),
    rateLimit: rate(opts.rateLimitRate, 'rateLimitRate'),
  };
  const retryAfterMs = opts.retryAfterMs ?? 200;
  const stats: StandinStats = {
    requests: 0,
    models: {},
    answered: 0,
    byStage: {},
    faults: {},
    authorizations: {},
    judgeWithStates: 0,
    contradicted: 0,
    deprecatedMaxTokens: 0,
    policy: { answers: {}, tasks: {} },
  };
  const faultCounters = new Map<string, number>();
  const hanging = new Set<() => void>();
  const app = Fastify({ logger: false, bodyLimit: 16 * 1024 * 1024, forceCloseConnections: true });

  const headerFault = (req: FastifyRequest): FaultKind | undefined => {
    const raw = req.headers['x-rods-fault'];
    const kind = (Array.isArray(raw) ? raw[0] : raw)?.trim().toLowerCase();
    if (!kind) return undefined;
    if (!(FAULT_KINDS as readonly string[]).includes(kind)) return undefined;
    const key = req.headers['x-rods-fault-key'];
    if (typeof key === 'string' && key) {
      const limit = Number(req.headers['x-rods-fault-count'] ?? '1');
      const seen = faultCounters.get(key) ?? 0;
      faultCounters.set(key, seen + 1);
      if (seen >= limit) return 'none';
    }
    return kind as FaultKind;
  };

  app.get('/health', async () => ({ ok: true, model: STANDIN_MODEL, seed: serverSeed, stats }));
  app.get('/v1/models', async () => ({
    object: 'list',
    data: [
      { id: STANDIN_MODEL, object: 'model', created: 0, owned_by: 'rods (stand-in generator, not an LLM)' },
    ],
  }));

  const chat = async (req: FastifyRequest, reply: FastifyReply, category?: SeedCategory) => {
    const started = Date.now();
    const n = ++stats.requests;
    const auth = req.headers.authorization;
    const authKey = auth ? sha256Hex(auth) : '(none)';
    stats.authorizations[authKey] = (stats.authorizations[authKey] ?? 0) + 1;
    const parsed = BodySchema.safeParse(req.body);
    if (!parsed.success) {
      return openAiError(
        reply,
        400,
        `invalid chat completion request: ${parsed.error.issues[0]?.message}`,
        'invalid_request_error',
      );
    }
    const body = parsed.data;
    if (body.model) stats.models[body.model] = (stats.models[body.model] ?? 0) + 1;
    if (body.max_tokens !== undefined && body.max_completion_tokens === undefined)
      stats.deprecatedMaxTokens++;
    if (body.stream)
      return openAiError(reply, 400, 'the stand-in generator does not stream', 'invalid_request_error');
    const ops = new Rng(`${serverSeed}|ops|${n}`);
    let fault = headerFault(req);
    if (fault === undefined) {
      if (ops.chance(rates.fail)) fault = '5xx';
      else if (ops.chance(rates.rateLimit)) fault = '429';
      else if (ops.chance(rates.timeout)) fault = 'timeout';
      else if (ops.chance(rates.malformed)) fault = 'malformed';
    }
    if (fault && fault !== 'none') stats.faults[fault] = (stats.faults[fault] ?? 0) + 1;
    const latency = Number(req.headers['x-rods-latency-ms'] ?? opts.latencyMs ?? 0);
    if (latency > 0 && fault !== 'timeout') await new Promise((r) => setTimeout(r, latency));
    const marker = body.messages.map((m) => parseStageMarker(text(m.content))).find((m) => m !== null);
    const stage = marker?.stage ?? '(none)';
    stats.byStage[stage] = (stats.byStage[stage] ?? 0) + 1;
    const log = (status: number | string) => {
      if (opts.log)
        console.error(`standin #${n} ${stage} ${fault ?? '-'} ${status} ${Date.now() - started} ms`);
    };

    if (fault === '5xx') {
      log(503);
      return openAiError(reply, 503, 'the stand-in generator injected a server error', 'server_error');
    }
    if (fault === '429') {
      log(429);
      reply
        .header('retry-after-ms', String(retryAfterMs))
        .header('retry-after', String(Math.ceil(retryAfterMs / 1000)));
      return openAiError(reply, 429, 'the stand-in generator injected a rate limit', 'rate_limit_error');
    }
    if (fault === 'timeout') {
      // Answer nothing until the client gives up (or the server closes).
      reply.hijack();
      const socket = req.raw.socket;
      await new Promise<void>((resolve) => {
        const release = () => socket.destroy();
        hanging.add(release);
        socket.once('close', () => {
          hanging.delete(release);
          resolve();
        });
      });
      log('hung');
      return reply;
    }
    if (!marker && opts.policy) {
      let answer: ReturnType<Policy['answer']>;
      try {
        answer = opts.policy.answer(body.messages, category);
      } catch (e) {
        if (!(e instanceof PolicyError)) throw e;
        log(400);
        return openAiError(reply, 400, `the stand-in policy: ${e.message}`, 'invalid_request_error');
      }
      const kind = answer.kind === 'calls' ? 'calls' : answer.why;
      stats.policy.answers[kind] = (stats.policy.answers[kind] ?? 0) + 1;
      stats.policy.tasks[answer.taskId] = (stats.policy.tasks[answer.taskId] ?? 0) + 1;
      stats.answered++;
      if (opts.policyDelayMs) await new Promise((r) => setTimeout(r, opts.policyDelayMs));
      log(200);
      const message =
        answer.kind === 'calls'
          ? { role: 'assistant', content: null, tool_calls: answer.toolCalls }
          : { role: 'assistant', content: answer.content };
      const promptChars = body.messages.reduce((k, m) => k + text(m.content).length, 0);
      const outChars = JSON.stringify(message).length;
      return reply.send({
        id: `chatcmpl-standin-policy-${n}`,
        object: 'chat.completion',
        created: Math.floor(Date.now() / 1000),
        model: body.model ?? STANDIN_MODEL,
        choices: [
          {
            index: 0,
            message,
            finish_reason: answer.kind === 'calls' ? 'tool_calls' : 'stop',
            logprobs: null,
          },
        ],
        usage: {
          prompt_tokens: Math.ceil(promptChars / 4),
          completion_tokens: Math.ceil(outChars / 4),
          total_tokens: Math.ceil(promptChars / 4) + Math.ceil(outChars / 4),
        },
      });
    }
    if (!marker) {
      log(400);
      return openAiError(
        reply,
        400,
        'the stand-in generator answers rods synthesis prompts only: no [rods-stage: <name> v<N>] marker in the messages',
        'invalid_request_error',
      );
    }
    if (fault === 'refuse-schema' && body.response_format?.type === 'json_schema') {
      log(400);
      return openAiError(
        reply,
        400,
        'the guided decoding backend xgrammar does not support the JSON schema: unsupported keyword "pattern" (stand-in playing a vLLM that refuses schema features)',
        'invalid_request_error',
      );
    }
    const input = findInput(body.messages);
    const key = `${serverSeed}|${body.seed ?? '-'}|${sha256Hex(canonicalJson(body.messages))}`;
    const rng = new Rng(key);
    const reject = stage === 'judge' && (fault === 'reject' || rng.fork('reject').chance(rates.reject));
    let value: unknown;
    try {
      value = answerStage(marker.stage, input, rng.fork('answer'), reject);
      if (stage === 'judge') {
        if (hasTurnStates(input)) stats.judgeWithStates++;
        if (rng.fork('contradict').chance(rates.contradict)) {
          const v = value as { verdict: 'accept' | 'reject' };
          value = { ...v, verdict: v.verdict === 'accept' ? 'reject' : 'accept' };
          stats.contradicted++;
        }
      }
    } catch (e) {
      if (e instanceof BadRequest) {
        log(400);
        return openAiError(reply, 400, e.message, 'invalid_request_error');
      }
      throw e;
    }
    const format = body.response_format?.type ?? 'text';
    const schema = body.response_format?.json_schema?.schema;
    if (format === 'json_schema' && schema && checkSchema(value, schema).length > 0) {
      // Asked for a shape the stage answer does not have: answer the smallest matching value.
      reply.header('x-rods-standin-note', `schema-fallback: ${checkSchema(value, schema)[0]}`);
      value = instanceOf(schema);
    }
    const json =
      format === 'text' ? `\`\`\`json\n${JSON.stringify(value, null, 2)}\n\`\`\`` : JSON.stringify(value);
    let content = fault === 'malformed' ? ops.pick(MALFORMED)(JSON.stringify(value)) : json;
    let reasoning: string | undefined;
    let finish = 'stop';
    const thinking = `Let me work through the ${stage} stage step by step. `.repeat(8);
    if (fault === 'reasoning' || fault === 'reasoning-legacy') reasoning = thinking;
    else if (fault === 'think-tags') content = `<think>\n${thinking}\n</think>\n\n${content}`;
    else if (fault === 'think-length') {
      reasoning = thinking.repeat(40);
      content = '';
      finish = 'length';
    }
    stats.answered++;
    log(200);
    const promptChars = body.messages.reduce((k, m) => k + text(m.content).length, 0);
    return reply.send({
      id: `chatcmpl-standin-${sha256Hex(`${key}|${n}`).slice(0, 24)}`,
      object: 'chat.completion',
      created: Math.floor(Date.now() / 1000),
      model: STANDIN_MODEL,
      system_fingerprint: `rods-standin-seed-${serverSeed}`,
      choices: [
        {
          index: 0,
          message: {
            role: 'assistant',
            content,
            // As current vLLM answers (the reasoning parser's output in `reasoning`); the fault
            // `reasoning-legacy` answers as vLLM before January 2026 did.
            ...(reasoning !== undefined
              ? fault === 'reasoning-legacy'
                ? { reasoning_content: reasoning }
                : { reasoning }
              : {}),
          },
          finish_reason: finish,
          logprobs: null,
        },
      ],
      usage: {
        prompt_tokens: Math.ceil(promptChars / 4),
        completion_tokens: Math.ceil(content.length / 4),
        total_tokens: Math.ceil(promptChars / 4) + Math.ceil(content.length / 4),
      },
    });
  };
  app.post('/v1/chat/completions', (req, reply) => chat(req, reply));
  app.post<{ Params: { category: string } }>('/policy/:category/v1/chat/completions', (req, reply) => {
    const { category } = req.params;
    if (!opts.policy)
      return openAiError(
        reply,
        404,
        'the stand-in runs without a policy (--policy-*)',
        'invalid_request_error',
      );
    if (!isSeedCategory(category))
      return openAiError(
        reply,
        404,
        `no category ${category}; categories: base, miss_func, miss_param, long_context`,
        'invalid_request_error',
      );
    return chat(req, reply, category);
  });

  return {
    app,
    stats,
    releaseHanging: () => {
      for (const release of [...hanging]) release();
    },
  };
}

/** Starts the stand-in generator; `close()` releases hanging requests and stops it. */
export async function startStandin(opts: StandinOptions = {}): Promise<StandinServer> {
  const { app, stats, releaseHanging } = buildStandin(opts);
  const host = opts.host ?? '127.0.0.1';
  await app.listen({ host, port: opts.port ?? DEFAULT_STANDIN_PORT });
  const address = app.server.address();
  const port = typeof address === 'object' && address ? address.port : (opts.port ?? DEFAULT_STANDIN_PORT);
  const shownHost = host.includes(':') ? `[${host}]` : host;
  return {
    url: `http://${shownHost}:${port}/v1`,
    port,
    stats,
    app,
    close: async () => {
      releaseHanging();
      await app.close();
    },
  };
}
