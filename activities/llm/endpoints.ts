// The operator's generator endpoints: base URL, API key and extra headers of each OpenAI-compatible
// server the worker may call, by name. They are configuration of the worker process (a file and
// the environment), never of a campaign: a campaign config names an endpoint and is recorded in
// the hash-chained log, Temporal histories and exports, so it must hold no URL, key or header.
// Activities resolve the name when they call, so Temporal payloads carry the name only.
import { readFileSync } from 'node:fs';
import { z } from 'zod';
import { DEFAULT_GENERATOR_ENDPOINT, GENERATOR_ENDPOINT_NAME } from '../../domain/campaign-config.js';
import { type GeneratorConfig, GeneratorConfigSchema } from './config.js';

/** Where `default` points when neither a file nor the environment defines it: a local vLLM. */
export const BUILTIN_DEFAULT_BASE_URL = 'http://127.0.0.1:8000/v1';

const ENV_NAME = /^[A-Za-z_][A-Za-z0-9_]*$/;

const EndpointSchema = z
  .strictObject({
    /** Base URL of the OpenAI-compatible API, including `/v1`. */
    baseUrl: z.url({ protocol: /^https?$/, error: 'must be an http(s) URL' }),
    /** The API key itself (keep the file private), or... */
    apiKey: z.string().min(1, 'must not be empty').optional(),
    /** ...the name of the worker's environment variable that holds it. */
    apiKeyEnv: z.string().regex(ENV_NAME, 'must be an environment variable name').optional(),
    /** Extra HTTP headers of every request (proxies, tenants). */
    headers: z.record(z.string().min(1), z.string()).default({}),
  })
  .refine((e) => !(e.apiKey !== undefined && e.apiKeyEnv !== undefined), {
    message: 'give apiKey or apiKeyEnv, not both',
    path: ['apiKeyEnv'],
  });

export type GeneratorEndpointInput = z.input<typeof EndpointSchema>;

const EndpointsFileSchema = z.record(z.string(), EndpointSchema).superRefine((r, ctx) => {
  for (const name of Object.keys(r))
    if (!GENERATOR_ENDPOINT_NAME.test(name))
      ctx.addIssue({
        code: 'custom',
        path: [name],
        message: 'endpoint names are letters, digits, ".", "_", "-" (at most 64)',
      });
});

export interface GeneratorEndpoint {
  name: string;
  baseUrl: string;
  /** Undefined: the endpoint takes no key (vLLM without --api-key). */
  apiKey?: string;
  headers: Record<string, string>;
}

export class EndpointConfigError extends Error {
  override name = 'EndpointConfigError';
}

/** A failure the same call would meet on every retry (unknown endpoint name). */
export class UnknownEndpointError extends Error {
  override name = 'UnknownEndpointError';
  constructor(
    readonly endpoint: string,
    readonly known: string[],
  ) {
    super(
      `the campaign names the generator endpoint ${JSON.stringify(endpoint)}, which this worker does not have (its endpoints: ${known.length ? known.join(', ') : 'none'}); define it in RODS_GENERATOR_ENDPOINTS_FILE (or RODS_GENERATOR_BASE_URL for "default") of every worker, or reconfigure the campaign with generator.endpoint set to one of them`,
    );
  }
}

/** The worker's endpoints by name. Printing or serializing it shows the names and URLs only. */
export class GeneratorEndpoints {
  private readonly byName: Map<string, GeneratorEndpoint>;
  constructor(
    endpoints: Iterable<GeneratorEndpoint>,
    /** Where they came from, for messages (a file, the environment). */
    readonly source = 'given',
  ) {
    this.byName = new Map([...endpoints].map((e) => [e.name, e]));
  }

  names(): string[] {
    return [...this.byName.keys()].sort();
  }

  has(name: string): boolean {
    return this.byName.has(name);
  }

  /** The endpoint of this name; UnknownEndpointError when there is none. */
  resolve(name: string): GeneratorEndpoint {
    const e = this.byName.get(name);
    if (!e) throw new UnknownEndpointError(name, this.names());
    return e;
  }

  toJSON(): { name: string; baseUrl: string }[] {
    return this.names().map((n) => ({ name: n, baseUrl: this.byName.get(n)!.baseUrl }));
  }

  /** Endpoints from a name → {baseUrl, apiKey | apiKeyEnv, headers} map (tests, the harness). */
  static of(
    input: Record<string, GeneratorEndpointInput>,
    env: NodeJS.ProcessEnv = process.env,
  ): GeneratorEndpoints {
    return new GeneratorEndpoints(parseEndpoints(input, 'endpoints', env), 'given');
  }
}

function zodMessage(error: z.ZodError, where: string): string {
  return error.issues.map((i) => `${[where, ...i.path.map(String)].join('.')}: ${i.message}`).join('; ');
}

function parseEndpoints(raw: unknown, where: string, env: NodeJS.ProcessEnv): GeneratorEndpoint[] {
  const r = EndpointsFileSchema.safeParse(raw);
  if (!r.success) throw new EndpointConfigError(zodMessage(r.error, where));
  return Object.entries(r.data).map(([name, e]) => {
    let apiKey = e.apiKey;
    if (e.apiKeyEnv !== undefined) {
      apiKey = env[e.apiKeyEnv];
      if (!apiKey)
        throw new EndpointConfigError(
          `${where}.${name}.apiKeyEnv: the environment variable ${e.apiKeyEnv} is not set (or empty)`,
        );
    }
    return { name, baseUrl: e.baseUrl, ...(apiKey !== undefined ? { apiKey } : {}), headers: e.headers };
  });
}

/**
 * The worker's endpoints: those of the JSON file RODS_GENERATOR_ENDPOINTS_FILE
 * ({"name": {"baseUrl", "apiKey" | "apiKeyEnv", "headers"}}), and `default` from
 * RODS_GENERATOR_BASE_URL, RODS_GENERATOR_API_KEY and RODS_GENERATOR_HEADERS (a JSON object) when
 * any of them is set. With neither a file nor these variables, `default` is a local vLLM
 * (http://127.0.0.1:8000/v1, no key). Throws EndpointConfigError naming the file and field.
 */
export function loadGeneratorEndpoints(env: NodeJS.ProcessEnv = process.env): GeneratorEndpoints {
  const out: GeneratorEndpoint[] = [];
  const sources: string[] = [];
  const file = env.RODS_GENERATOR_ENDPOINTS_FILE;
  if (file) {
    let raw: unknown;
    try {
      raw = JSON.parse(readFileSync(file, 'utf8'));
    } catch (e) {
      throw new EndpointConfigError(
        `RODS_GENERATOR_ENDPOINTS_FILE ${file}: cannot read it as JSON: ${(e as Error).message}`,
      );
    }
    out.push(...parseEndpoints(raw, file, env));
    sources.push(file);
  }
  const { RODS_GENERATOR_BASE_URL: url, RODS_GENERATOR_API_KEY: key, RODS_GENERATOR_HEADERS: hdrs } = env;
  if (url || key || hdrs) {
    if (out.some((e) => e.name === DEFAULT_GENERATOR_ENDPOINT))
      throw new EndpointConfigError(
        `the endpoint "default" is defined twice: in ${file} and by RODS_GENERATOR_BASE_URL/RODS_GENERATOR_API_KEY/RODS_GENERATOR_HEADERS; keep one`,
      );
    let headers: unknown = {};
    if (hdrs) {
      try {
        headers = JSON.parse(hdrs);
      } catch (e) {
        throw new EndpointConfigError(`RODS_GENERATOR_HEADERS: not JSON: ${(e as Error).message}`);
      }
    }
    const r = EndpointSchema.safeParse({
      baseUrl: url || BUILTIN_DEFAULT_BASE_URL,
      ...(key ? { apiKey: key } : {}),
      headers,
    });
    if (!r.success)
      throw new EndpointConfigError(
        zodMessage(r.error, 'environment')
          .replace(/environment\.baseUrl/g, 'RODS_GENERATOR_BASE_URL')
          .replace(/environment\.headers/g, 'RODS_GENERATOR_HEADERS'),
      );
    out.push({
      name: DEFAULT_GENERATOR_ENDPOINT,
      baseUrl: r.data.baseUrl,
      ...(r.data.apiKey !== undefined ? { apiKey: r.data.apiKey } : {}),
      headers: r.data.headers,
    });
    sources.push('environment');
  }
  if (!file && out.length === 0)
    out.push({ name: DEFAULT_GENERATOR_ENDPOINT, baseUrl: BUILTIN_DEFAULT_BASE_URL, headers: {} });
  return new GeneratorEndpoints(out, sources.join(' and ') || 'built-in default');
}

/**
 * The client configuration of one call: the campaign's generator section (parsed: an endpoint
 * name and non-secret knobs) with URL, key and headers of the named operator endpoint. Whatever
 * URL, key or header an old recorded config carries is never used.
 */
export function resolveGeneratorConfig(
  campaignGenerator: Record<string, unknown>,
  endpoints: GeneratorEndpoints,
): GeneratorConfig {
  const { endpoint: name, baseUrl: _u, apiKey: _k, apiKeyEnv: _e, headers: _h, ...knobs } = campaignGenerator;
  const ep = endpoints.resolve(typeof name === 'string' ? name : DEFAULT_GENERATOR_ENDPOINT);
  return GeneratorConfigSchema.parse({
    ...knobs,
    endpoint: ep.name,
    baseUrl: ep.baseUrl,
    ...(ep.apiKey !== undefined ? { apiKey: ep.apiKey } : {}),
    headers: ep.headers,
  });
}
