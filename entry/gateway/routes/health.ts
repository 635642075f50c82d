// Liveness, readiness (PostgreSQL and Temporal, the two stores of the write path) and the
// OpenAPI document: the routes anyone may call.
import type { FastifyInstance } from 'fastify';
import { ping } from '../../../platform/store/db.js';
import { ACCESS } from '../access.js';
import { openApiDocument } from '../openapi.js';
import { problem, sendProblem } from '../problem.js';
import type { RouteContext } from './context.js';

export function registerHealthRoutes(app: FastifyInstance, ctx: RouteContext): void {
  app.get('/healthz', ACCESS.open, async () => ({ ok: true }));
  // Ready when both stores of the write path answer: PostgreSQL (batches) and Temporal (their
  // ingestion workflows). Either down: 503 naming it, while the process keeps running.
  app.get('/readyz', ACCESS.open, async (_req, reply) => {
    if (!(await ping(ctx.db)))
      return sendProblem(reply, problem(503, 'PostgreSQL is unreachable', undefined, 'database-unavailable'));
    const temporal = await ctx.temporal.connection
      .withDeadline(Date.now() + 2000, () => ctx.temporal.workflowService.getSystemInfo({}))
      .then(
        () => null,
        (e: Error) => e.message.split('\n')[0] ?? 'error',
      );
    if (temporal !== null)
      return sendProblem(
        reply,
        problem(503, `Temporal is unreachable: ${temporal}`, undefined, 'temporal-unavailable'),
      );
    return { ready: true };
  });
  // This gateway's document (its batch cap and body limit), built on the first request.
  let doc: Record<string, unknown> | undefined;
  app.get('/openapi.json', ACCESS.open, async () => {
    doc ??= openApiDocument({ maxBatchN: ctx.limits.maxBatchN, bodyLimit: app.initialConfig.bodyLimit });
    return doc;
  });
}
