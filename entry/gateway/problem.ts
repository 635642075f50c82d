// RFC 9457 problem details: every error the gateway returns is application/problem+json with
// type, title, status, detail and, for validation, errors [{field, message}].
import type { FastifyError, FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type pg from 'pg';
import type { z } from 'zod';
import { databaseStatus, isConnectionError, isDatabaseUnavailable } from '../../platform/store/db.js';

export interface FieldError {
  field: string;
  message: string;
}

export interface Problem {
  type: string;
  title: string;
  status: number;
  detail: string;
  errors?: FieldError[];
  [extra: string]: unknown;
}

const TITLES: Record<number, [slug: string, title: string]> = {
  400: ['malformed-request', 'Malformed request'],
  401: ['unauthenticated', 'Missing bearer token'],
  403: ['forbidden', 'Forbidden'],
  404: ['not-found', 'Not found'],
  405: ['method-not-allowed', 'Method not allowed'],
  409: ['conflict', 'Conflict'],
  413: ['payload-too-large', 'Payload too large'],
  415: ['unsupported-media-type', 'Unsupported media type'],
  422: ['validation', 'Validation failed'],
  429: ['too-many-requests', 'Too many requests'],
  500: ['internal', 'Internal error'],
  503: ['unavailable', 'Service unavailable'],
};

export const PROBLEM_TYPE_PREFIX = 'urn:rods:problem:';

export class ProblemError extends Error {
  constructor(
    readonly status: number,
    detail: string,
    readonly errors?: FieldError[],
    readonly slug?: string,
    /** RFC 9457 extension members (e.g. step, lastClosedStep), next to the standard ones. */
    readonly extensions?: Record<string, unknown>,
  ) {
    super(detail);
  }
}

export function problem(
  status: number,
  detail: string,
  errors?: FieldError[],
  slug?: string,
  extensions?: Record<string, unknown>,
): Problem {
  const [defSlug, title] = TITLES[status] ?? ['error', 'Error'];
  const p: Problem = {
    type: `${PROBLEM_TYPE_PREFIX}${slug ?? defSlug}`,
    title,
    status,
    detail,
    ...(errors ? { errors } : {}),
  };
  // Extensions follow the standard members and never replace one.
  return extensions ? { ...p, ...extensions, ...p } : p;
}

export function sendProblem(reply: FastifyReply, p: Problem): FastifyReply {
  return reply.code(p.status).type('application/problem+json').send(p);
}

/** `['groups', 3, 'rewards', 2]` → `groups[3].rewards[2]` (prefixed for query and path parameters). */
export function fieldPath(path: readonly PropertyKey[], prefix = ''): string {
  let out = prefix;
  for (const seg of path) {
    if (typeof seg === 'number') out += `[${seg}]`;
    else out += out ? `.${String(seg)}` : String(seg);
  }
  return out || '(body)';
}

/**
 * The field errors a 422 lists at most: a body under the size limit can hold millions of bad
 * values (1.6 million rewards), each listed twice (errors, detail) before this cap.
 */
export const MAX_FIELD_ERRORS = 100;

/** The first `max` field errors of a zod error, in order, and how many there are in all. */
function firstZodErrors(
  error: z.ZodError,
  prefix: string,
  max: number,
): { errors: FieldError[]; count: number } {
  const errors: FieldError[] = [];
  let count = 0;
  for (const i of error.issues) {
    const keys = i.code === 'unrecognized_keys' ? i.keys : [undefined];
    for (const k of keys) {
      count++;
      if (errors.length < max)
        errors.push(
          k === undefined
            ? { field: fieldPath(i.path, prefix), message: i.message }
            : { field: fieldPath([...i.path, k], prefix), message: 'unknown field' },
        );
    }
  }
  return { errors, count };
}

/**
 * Parses with a zod schema or throws a 422 problem naming each bad field (the first
 * MAX_FIELD_ERRORS of them, with errorCount when there are more; with extensions, if given).
 */
export function parseOr422<T>(
  schema: z.ZodType<T>,
  value: unknown,
  what: string,
  prefix = '',
  extensions?: Record<string, unknown>,
): T {
  const r = schema.safeParse(value);
  if (!r.success) {
    const { errors, count } = firstZodErrors(r.error, prefix, MAX_FIELD_ERRORS);
    const more = count - errors.length;
    const ext = more > 0 ? { ...extensions, errorCount: count } : extensions;
    throw new ProblemError(
      422,
      `invalid ${what}: ${errors.map((e) => `${e.field}: ${e.message}`).join('; ')}${more > 0 ? `; and ${more} more` : ''}`,
      errors,
      undefined,
      ext,
    );
  }
  return r.data;
}

/** The 404 of a path no route matches (the same for every caller: entry/gateway/access.ts). */
export function noRoute(req: FastifyRequest): Problem {
  return problem(404, `no route ${req.method} ${req.url.split('?')[0]}`);
}

/**
 * Answers every error as a problem: a ProblemError as it says, PostgreSQL away or refusing work
 * as a 503 with Retry-After, other client errors with their status, anything else a 500 naming
 * the request id (the log has the error). An unknown route is a 404 problem.
 */
export function registerProblemHandlers(app: FastifyInstance, db: pg.Pool, bodyLimit: number): void {
  app.setErrorHandler((err: FastifyError, req, reply) => {
    if (err instanceof ProblemError)
      return sendProblem(reply, problem(err.status, err.message, err.errors, err.slug, err.extensions));
    // PostgreSQL restarting or away: a 503 the client retries, not a 500.
    if (isConnectionError(err)) {
      databaseStatus(db).lost(err);
      return sendProblem(
        reply.header('Retry-After', '1'),
        problem(
          503,
          'the database is unreachable; retry the same request',
          undefined,
          'database-unavailable',
        ),
      );
    }
    // Disk full, read-only, a statement or lock timeout: the request is fine, retry it later.
    if (isDatabaseUnavailable(err)) {
      req.log.warn(
        { err: (err as Error).message, code: (err as { code?: string }).code },
        'database refused the work',
      );
      return sendProblem(
        reply.header('Retry-After', '5'),
        problem(
          503,
          `the database cannot take the request now (${(err as { code?: string }).code}: ${(err as Error).message}); retry the same request`,
          undefined,
          'database-unavailable',
        ),
      );
    }
    const status = err.statusCode ?? 500;
    if (status >= 400 && status < 500) {
      const detail = status === 413 ? `request body exceeds the limit of ${bodyLimit} bytes` : err.message;
      return sendProblem(reply, problem(status, detail));
    }
    req.log.error({ err }, 'request failed');
    return sendProblem(
      reply,
      problem(status >= 500 && status < 600 ? status : 500, `internal error (request ${req.id})`),
    );
  });
  app.setNotFoundHandler((req, reply) => sendProblem(reply, noRoute(req)));
}
