// Who may call a route: each route declares its access in its config, and one onRequest hook
// identifies the bearer token, applies the per-token rate limit and checks the scopes before the
// handler runs (entry/gateway/auth.ts holds the scope rules). A path no route matches (404) or a
// method its routes do not declare (405, entry/gateway/routing.ts) is answered right after the
// rate limit, the same to every caller, with or without a valid token.
import fastifyRateLimit from '@fastify/rate-limit';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import {
  bearerToken,
  describeMissing,
  grantingScopes,
  missingScopes,
  type Principal,
  type Requirement,
  type TokenSet,
} from './auth.js';
import { noRoute, ProblemError, problem, sendProblem } from './problem.js';
import { type GatewayLimits, LIMIT_ENV } from './request-limits.js';
import { methodNotAllowed } from './routing.js';

/**
 * What a route asks of the caller: nothing (`open`), the admin scope, or a scope over the
 * campaign of its `:id` (`campaign-read`: read, campaign:<id> or admin; `campaign-write`:
 * campaign:<id> or admin), or any valid token (`authenticated`: the route filters by scope). A
 * route that declares nothing needs admin (fastify's not-found route is not one: it is a 404).
 */
export type Access = 'open' | 'authenticated' | 'admin' | 'campaign-read' | 'campaign-write';

declare module 'fastify' {
  interface FastifyContextConfig {
    access?: Access;
  }
  interface FastifyRequest {
    principal?: Principal;
  }
}

/** Route options that declare each kind of access (`app.get(url, ACCESS.campaignRead, handler)`). */
export const ACCESS = {
  open: { config: { access: 'open' as const } },
  authenticated: { config: { access: 'authenticated' as const } },
  admin: { config: { access: 'admin' as const } },
  campaignRead: { config: { access: 'campaign-read' as const } },
  campaignWrite: { config: { access: 'campaign-write' as const } },
};

function requirement(req: FastifyRequest, access: Access | undefined): Requirement {
  const campaignId = String((req.params as { id?: unknown } | undefined)?.id ?? '');
  if (access === 'campaign-read') return { kind: 'campaign-read', campaignId };
  if (access === 'campaign-write') return { kind: 'campaign-write', campaignId };
  if (access === 'authenticated') return { kind: 'authenticated' };
  return { kind: 'admin' };
}

/**
 * Installs the token check (401, 403 naming the missing scope), the per-token rate limit (429) and
 * the answers to unknown routes (404) and undeclared methods (405).
 */
export function registerAccess(app: FastifyInstance, tokens: TokenSet, limits: GatewayLimits): void {
  // Requests per window, keyed by the token's label (never the token), or by address for a
  // request without a valid token; answered 429 with Retry-After (set by the plugin).
  app.decorateRequest('principal', undefined);
  let rateLimited: ((req: FastifyRequest, reply: unknown) => Promise<void>) | undefined;
  if (limits.rateLimit.max > 0) {
    app.register(fastifyRateLimit, { global: false }).after(() => {
      rateLimited = app.rateLimit({
        max: limits.rateLimit.max,
        timeWindow: limits.rateLimit.windowMs,
        keyGenerator: (req) => (req.principal ? `token:${req.principal.label}` : `ip:${req.ip}`),
        errorResponseBuilder: (req, ctx) =>
          new ProblemError(
            429,
            `more than ${ctx.max} requests in ${limits.rateLimit.windowMs / 1000} s for this ${req.principal ? 'token' : 'address without a valid token'} (${LIMIT_ENV.rateMax}); retry in ${ctx.after}`,
            undefined,
            'rate-limited',
            { limit: ctx.max, windowSeconds: limits.rateLimit.windowMs / 1000 },
          ),
      }) as (req: FastifyRequest, reply: unknown) => Promise<void>;
    });
  }

  app.addHook('onRequest', async (req, reply) => {
    const config = req.routeOptions.config;
    const access = config?.access;
    if (access === 'open') return;
    const header = req.headers.authorization;
    const token = bearerToken(header);
    req.principal = token === undefined ? undefined : tokens.identify(token);
    // Counted like any request (per token, or per address without a valid one), so unknown routes
    // and methods are no way around the limit.
    await rateLimited?.(req, reply);
    // The routes are public (/openapi.json) and these answers read nothing else: the same to every
    // caller, before the token is checked or a body is read (QUERY without a Content-Type included).
    if (req.is404) return sendProblem(reply, noRoute(req));
    if (config?.allow) return methodNotAllowed(reply, req.method, req.routeOptions.url ?? '', config.allow);
    if (token === undefined) {
      reply.header('WWW-Authenticate', 'Bearer realm="rods"');
      return sendProblem(
        reply,
        problem(
          401,
          header ? 'the Authorization header is not a bearer token' : 'missing Authorization: Bearer <token>',
        ),
      );
    }
    if (!req.principal) {
      reply.header('WWW-Authenticate', 'Bearer realm="rods", error="invalid_token"');
      return sendProblem(reply, problem(403, 'the bearer token is not valid'));
    }
    const need = requirement(req, access);
    const missing = missingScopes(req.principal, need);
    if (missing) {
      // The scope names a campaign id from the path: only a valid id goes into the header.
      const scope = grantingScopes(need).join(' ');
      reply.header(
        'WWW-Authenticate',
        `Bearer realm="rods", error="insufficient_scope"${/^[\w.: -]+$/.test(scope) ? `, scope="${scope}"` : ''}`,
      );
      return sendProblem(
        reply,
        problem(
          403,
          `${describeMissing(missing)}: ${req.method} ${req.routeOptions.url ?? req.url.split('?')[0]}`,
          undefined,
          'insufficient-scope',
          { requiredScopes: missing },
        ),
      );
    }
  });
}
