// The active pool: the whole pool (ETag = pool version, long-poll with a bounded number per
// token) and a seeded sample of it that fits the body limit.
import { randomUUID } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import type { FastifyInstance } from 'fastify';
import { activePool, poolVersion } from '../../../platform/store/pool/active.js';
import { ACCESS } from '../access.js';
import { parseIfNoneMatch, sample } from '../pool.js';
import { ProblemError, parseOr422 } from '../problem.js';
import { fitTasks, LIMIT_ENV } from '../request-limits.js';
import { batchQuery, CampaignParams, PoolQuery } from '../schemas.js';
import { type RouteContext, requireCampaign } from './context.js';

export function registerPoolRoutes(app: FastifyInstance, ctx: RouteContext): void {
  // n up to this gateway's cap: the bound its OpenAPI document gives (entry/gateway/openapi.ts).
  const BatchQuery = batchQuery(ctx.limits.maxBatchN);
  app.get('/v1/campaigns/:id/pool', ACCESS.campaignRead, async (req, reply) => {
    const { id } = parseOr422(CampaignParams, req.params, 'path');
    const { wait } = parseOr422(PoolQuery, req.query, 'query');
    await requireCampaign(ctx.db, id);
    const inm = parseIfNoneMatch(req.headers['if-none-match']);
    const matches = (v: number) => inm.any || inm.versions.includes(v);
    let version = await poolVersion(ctx.db, id);
    if (matches(version) && wait && wait > 0) {
      // Each held long-poll costs a connection and a query per poll: a bounded number per token.
      const key = req.principal?.label ?? '';
      if (!ctx.longPolls.acquire(key)) {
        reply.header('Retry-After', '1');
        throw new ProblemError(
          429,
          `this token already holds ${ctx.limits.maxLongPollsPerToken} pool long-polls (${LIMIT_ENV.maxLongPollsPerToken}); retry when one returns, or poll without wait`,
          undefined,
          'too-many-long-polls',
          { maxLongPolls: ctx.limits.maxLongPollsPerToken },
        );
      }
      const ac = new AbortController();
      const onClose = () => ac.abort();
      req.raw.on('close', onClose);
      const deadline = Date.now() + wait * 1000;
      try {
        while (matches(version) && Date.now() < deadline && !ac.signal.aborted) {
          await sleep(Math.min(ctx.pollMs, Math.max(0, deadline - Date.now())));
          version = await poolVersion(ctx.db, id);
        }
      } finally {
        req.raw.off('close', onClose);
        ctx.longPolls.release(key);
      }
    }
    if (matches(version)) return reply.code(304).header('ETag', `"${version}"`).send();
    const p = await activePool(ctx.db, id);
    if (matches(p.version)) return reply.code(304).header('ETag', `"${p.version}"`).send();
    return reply.header('ETag', `"${p.version}"`).header('Cache-Control', 'no-cache').send(p);
  });

  app.get('/v1/campaigns/:id/batch', ACCESS.campaignRead, async (req, reply) => {
    const { id } = parseOr422(CampaignParams, req.params, 'path');
    const q = parseOr422(BatchQuery, req.query, 'query', '', { maxN: ctx.limits.maxBatchN });
    await requireCampaign(ctx.db, id);
    const p = await activePool(ctx.db, id);
    if (p.tasks.length === 0)
      throw new ProblemError(409, `the active pool of campaign ${id} is empty`, undefined, 'empty-pool');
    const seed = q.seed ?? randomUUID();
    const drawn = sample(p.tasks, q.n, `${p.version}/${seed}`);
    // The body stays under maxBatchBytes: the first draws that fit (a prefix of the same seeded
    // sample), `truncated` when some were left out; the trainer asks again for the rest.
    const envelope = { campaignId: id, version: p.version, seed, n: q.n, requested: q.n, truncated: false };
    const most = { ...envelope, maxBytes: ctx.limits.maxBatchBytes, tasks: [] };
    const tasks = fitTasks(drawn, Buffer.byteLength(JSON.stringify(most), 'utf8'), ctx.limits.maxBatchBytes);
    const truncated = tasks.length < drawn.length;
    return reply.header('ETag', `"${p.version}"`).send({
      ...envelope,
      n: tasks.length,
      truncated,
      ...(truncated ? { maxBytes: ctx.limits.maxBatchBytes } : {}),
      tasks,
    });
  });
}
