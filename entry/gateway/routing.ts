// Unknown routes and undeclared methods. A path no route matches is a 404 and a path asked with a
// method its routes do not declare a 405 with `Allow`: both answered by the access hook
// (entry/gateway/access.ts) after the rate limit and before any token, scope, parameter or body is
// looked at, so every caller gets the same answer (the routes are public in /openapi.json, and
// neither answer reads the store, so neither says which campaigns exist).
//
// fastify routes by method first: a method no route of a path declares falls to the not-found
// route (TRACE was a 404 there, and QUERY a 400 because fastify asks a QUERY request for a
// Content-Type before any handler runs). So the gateway declares, for each path, a route taking
// every other method, marked with the methods the path allows; and it routes every method Node's
// HTTP parser accepts, not only the ones fastify knows (PROPFIND, SEARCH, ...).
import http from 'node:http';
import type { FastifyInstance, FastifyReply } from 'fastify';
import { problem, sendProblem } from './problem.js';

declare module 'fastify' {
  interface FastifyContextConfig {
    /** A route that only answers 405: the methods its path declares (`Allow`). */
    allow?: readonly string[];
  }
}

/** The 405 problem with its Allow header; `url` is the route's pattern, never the request's path. */
export function methodNotAllowed(
  reply: FastifyReply,
  method: string,
  url: string,
  allow: readonly string[],
): FastifyReply {
  reply.header('Allow', allow.join(', '));
  return sendProblem(
    reply,
    problem(405, `${method} is not allowed on ${url}: it takes ${allow.join(', ')}`, undefined, undefined, {
      allow,
    }),
  );
}

/**
 * Records the methods each route pattern declares, as routes are added (HEAD included where fastify
 * adds it to a GET route); call it before adding any route.
 */
export function declaredMethods(app: FastifyInstance): Map<string, Set<string>> {
  const declared = new Map<string, Set<string>>();
  app.addHook('onRoute', (route) => {
    if (route.config?.allow) return;
    const methods = declared.get(route.url) ?? new Set<string>();
    for (const m of [route.method].flat()) methods.add(m);
    declared.set(route.url, methods);
  });
  return declared;
}

/**
 * Whether two route patterns can match one path (a `:param` segment matches any segment, a `*`
 * any rest): then a 405 route of one could hide a route of the other for the same method.
 */
export function patternsOverlap(a: string, b: string): boolean {
  const x = a.split('/');
  const y = b.split('/');
  for (let i = 0; ; i++) {
    if (x[i] === '*' || y[i] === '*') return true;
    if (i >= x.length || i >= y.length) return x.length === y.length;
    if (x[i] !== y[i] && !x[i]!.includes(':') && !y[i]!.includes(':')) return false;
  }
}

/**
 * For each declared pattern, a route taking every method it does not declare, answered 405 (by
 * the access hook, else by its handler); call it after every route is added. A method another
 * pattern that can match the same paths declares is left to that pattern's route.
 */
export function registerMethodNotAllowed(app: FastifyInstance, declared: Map<string, Set<string>>): void {
  // CONNECT never reaches a route (Node hands the socket to a 'connect' listener).
  for (const m of http.METHODS)
    if (m !== 'CONNECT' && !app.supportedMethods.includes(m)) app.addHttpMethod(m);
  for (const [url, methods] of [...declared]) {
    const allow = [...methods].sort();
    const elsewhere = new Set(
      [...declared].flatMap(([other, ms]) => (other !== url && patternsOverlap(url, other) ? [...ms] : [])),
    );
    const others = app.supportedMethods.filter((m) => !methods.has(m) && !elsewhere.has(m));
    if (others.length === 0) continue;
    app.route({
      method: others,
      url,
      exposeHeadRoute: false,
      config: { allow },
      handler: async (req, reply) => methodNotAllowed(reply, req.method, url, allow),
    });
  }
}
