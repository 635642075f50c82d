// Configuration of the LLM generator: any OpenAI-compatible chat-completions endpoint (vLLM in
// production, the project's stand-in generator in tests and the demo).
import { z } from 'zod';

export const STRUCTURED_OUTPUT_MODES = ['json_schema', 'json_object', 'none'] as const;
export type StructuredOutputMode = (typeof STRUCTURED_OUTPUT_MODES)[number];

/** The local stand-in generator (`npx rods standin-generator`), the default endpoint of the local stack. */
export const DEFAULT_GENERATOR_URL = 'http://127.0.0.1:7400/v1';
export const STANDIN_MODEL_ID = 'rods-standin-generator';

export const GeneratorConfigSchema = z
  .object({
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
    /** Time limit of one HTTP request (ms). */
    timeoutMs: z.number().int().positive().default(120_000),
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

const num = (v: string | undefined): number | undefined => {
  if (v === undefined || v === '') return undefined;
  const n = Number(v);
  if (!Number.isFinite(n)) throw new Error(`not a number: ${v}`);
  return n;
};

/**
 * The generator configuration from the environment: RODS_GENERATOR_URL (default: the local
 * stand-in at http://127.0.0.1:7400/v1), RODS_GENERATOR_MODEL (default rods-standin-generator),
 * RODS_GENERATOR_JUDGE_MODEL, RODS_GENERATOR_API_KEY, RODS_GENERATOR_TIMEOUT_MS,
 * RODS_GENERATOR_MAX_TOKENS, RODS_GENERATOR_TEMPERATURE, RODS_GENERATOR_TOP_P,
 * RODS_GENERATOR_STRUCTURED_OUTPUT (json_schema | json_object | none).
 */
export function generatorConfigFromEnv(
  env: NodeJS.ProcessEnv = process.env,
  overrides: Partial<GeneratorConfigInput> = {},
): GeneratorConfig {
  const fromEnv: GeneratorConfigInput = {
    baseUrl: env.RODS_GENERATOR_URL || DEFAULT_GENERATOR_URL,
    model: env.RODS_GENERATOR_MODEL || STANDIN_MODEL_ID,
    judgeModel: env.RODS_GENERATOR_JUDGE_MODEL || undefined,
    apiKey: env.RODS_GENERATOR_API_KEY || undefined,
    timeoutMs: num(env.RODS_GENERATOR_TIMEOUT_MS),
    maxTokens: num(env.RODS_GENERATOR_MAX_TOKENS),
    temperature: num(env.RODS_GENERATOR_TEMPERATURE),
    topP: num(env.RODS_GENERATOR_TOP_P),
    structuredOutput: (env.RODS_GENERATOR_STRUCTURED_OUTPUT || undefined) as StructuredOutputMode | undefined,
  };
  const merged = Object.fromEntries(
    Object.entries({ ...fromEnv, ...overrides }).filter(([, v]) => v !== undefined),
  ) as GeneratorConfigInput;
  return GeneratorConfigSchema.parse(merged);
}
