// Configuration of one LLM generator client: any OpenAI-compatible chat-completions endpoint (vLLM
// in production, the project's stand-in generator in tests and the demo). Built per call from the
// campaign's knobs and the operator's endpoint (endpoints.ts); never recorded.
import { z } from 'zod';

export const STRUCTURED_OUTPUT_MODES = ['json_schema', 'json_object', 'none'] as const;
export type StructuredOutputMode = (typeof STRUCTURED_OUTPUT_MODES)[number];

export const GeneratorConfigSchema = z
  .object({
    /** Name of the operator's endpoint the URL, key and headers come from (for messages). */
    endpoint: z.string().optional(),
    /** Base URL of the OpenAI-compatible API, including `/v1` (vLLM: http://host:8000/v1). */
    baseUrl: z.url({ protocol: /^https?$/ }),
    /** vLLM accepts any key unless started with --api-key. */
    apiKey: z.string().default('EMPTY'),
    /** Model of the plan, parameter, config-patch, rewrite and refine stages. */
    model: z.string().min(1),
    /** Model of the quality judge (defaults to `model`). */
    judgeModel: z.string().min(1).optional(),
    temperature: z.number().min(0).max(2).default(1.0),
    topP: z.number().gt(0).max(1).default(0.7),
    maxTokens: z.number().int().positive().default(4096),
    /**
     * Time limit of one HTTP request (ms). Unset: 120 s, or longer when maxTokens at
     * minTokensPerSecond needs it (client.ts requestTimeoutMs).
     */
    timeoutMs: z.number().int().positive().optional(),
    /** The slowest decoding speed expected of a loaded server: sizes the default request time limit. */
    minTokensPerSecond: z.number().positive().default(20),
    /** Answers a stage gets to produce schema-valid JSON (the first ask included). */
    maxAttempts: z.number().int().min(1).default(3),
    /** Retries of transient failures (5xx, 429, timeouts, connection errors) over one chatJson call. */
    transientRetries: z.number().int().min(0).default(4),
    /** Exponential backoff: base and cap of the delay before a transient retry (ms); full jitter on top. */
    backoffBaseMs: z.number().int().min(0).default(500),
    backoffMaxMs: z.number().int().min(0).default(15_000),
    /** The longest Retry-After of a 429 that is honoured (ms). */
    retryAfterCapMs: z.number().int().min(0).default(60_000),
    /** How to ask for JSON: response_format json_schema (vLLM guided decoding), json_object, or nothing. */
    structuredOutput: z.enum(STRUCTURED_OUTPUT_MODES).default('json_schema'),
    /** How often chatJson calls the heartbeat callback while it waits (ms). */
    heartbeatIntervalMs: z.number().int().positive().default(5_000),
    /** Extra HTTP headers sent with every request (proxies, the stand-in's fault headers in tests). */
    headers: z.record(z.string(), z.string()).default({}),
    /** Extra request-body fields, e.g. vLLM's {chat_template_kwargs: {enable_thinking: false}} for Qwen3. */
    extraBody: z.record(z.string(), z.unknown()).default({}),
    /** Folder of the versioned stage prompts (default: the repository's prompts/). */
    promptsDir: z.string().min(1).optional(),
  })
  .transform((c) => ({ ...c, judgeModel: c.judgeModel ?? c.model }));

export type GeneratorConfig = z.output<typeof GeneratorConfigSchema>;
export type GeneratorConfigInput = z.input<typeof GeneratorConfigSchema>;

/** Validates a generator configuration and fills in the defaults (throws a ZodError when invalid). */
export function generatorConfig(input: GeneratorConfigInput): GeneratorConfig {
  return GeneratorConfigSchema.parse(input);
}
