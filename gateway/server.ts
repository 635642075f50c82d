// The gateway: the trainer's HTTP entry point. Registers and starts campaigns, accepts scored
// rollout batches (claim check in PostgreSQL, then published to Kafka by the gateway itself, or by
// an idempotent ingestion workflow when that fails: gateway/publish.ts) and
// serves the active pool (ETag = pool version, long-poll) and seeded samples of it. Every error
// is RFC 9457 problem+json.
import { randomUUID } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import fastifyRateLimit from '@fastify/rate-limit';
import { type Client, WorkflowExecutionAlreadyStartedError, WorkflowIdReusePolicy } from '@temporalio/client';
import Fastify, { type FastifyError, type FastifyInstance, type FastifyRequest } from 'fastify';
import type pg from 'pg';
import type { Registry } from 'prom-client';
import { NewCampaignConfigSchema, redactCampaignConfig } from '../domain/campaign-config.js';
import type { OutgoingRecord } from '../kafka/port.js';
import { REWARDS_TOPIC } from '../kafka/topology.js';
import { campaignStatus, type StatusOptions } from '../status/campaign-status.js';
import { campaignOf } from '../status/kafka.js';
import { StatusKafka } from '../status/kafka-shared.js';
import { loadCampaign } from '../store/campaigns.js';
import { databaseStatus, isConnectionError, isDatabaseUnavailable, ping } from '../store/db.js';
import { activePool, poolVersion } from '../store/pool/active.js';
import type { IngestionInput } from '../workflows/ingestion.js';
import { ingestionWorkflow } from '../workflows/ingestion.js';
import {
  CampaignExistsError,
  startCampaign,
  UnknownGeneratorEndpointError,
} from '../workflows/start-campaign.js';
import {
  bearerToken,
  describeMissing,
  grantingScopes,
  missingScopes,
  type Principal,
  type Requirement,
  type TokenSet,
} from './auth.js';
import { type DashboardOptions, registerDashboard } from './dashboard.js';
import { acceptBatch } from './ingest.js';
import { instrumentGateway } from './metrics.js';
import { openApiDocument } from './openapi.js';
import { parseIfNoneMatch, sample } from './pool.js';
import { ProblemError, parseOr422, problem, sendProblem } from './problem.js';
import type { DirectPublisher } from './publish.js';
import { BatchReconciler, type ReconcileSettings } from './reconcile.js';
import { DEFAULT_LIMITS, fitTasks, type GatewayLimits, LIMIT_ENV, LongPolls } from './request-limits.js';
import {
  BatchQuery,
  CampaignCreate,
  CampaignParams,
  CampaignStatusQuery,
  PoolQuery,
  RolloutBatch,
  StepParams,
} from './schemas.js';

export const DEFAULT_BODY_LIMIT = 8 * 1024 * 1024;
export const DEFAULT_PORT = 7500;

export interface GatewayOptions {
  db: pg.Pool;
  temporal: Client;
  tokens: TokenSet;
  /** Task queue of the rods worker (campaign and ingestion workflows). */
  taskQueue: string;
  /** Maximum request body in bytes (default 8 MiB). */
  bodyLimit?: number;
  /** Topic the ingestion workflows publish to (default rods.rewards.v1). */
  rewardsTopic?: string;
  /**
   * Publishes new batches right after their commit (gateway/publish.ts; give it the rewards
   * topic); absent, every batch goes through its ingestion workflow.
   */
  publisher?: DirectPublisher;
  /** Poll period of pool long-polls (default 250 ms). */
  pollMs?: number;
  /** How long a status query may wait for a worker once one polls (default 5 s). */
  queryTimeoutMs?: number;
  /** Where the campaign status looks for the relay and the aggregators (status/campaign-status.ts). */
  status?: Pick<StatusOptions, 'relayName' | 'aggregatorGroup' | 'synthesisTimeoutMs'>;
  logLevel?: string;
  /** Publish accepted batches left unpublished (gateway/reconcile.ts); off when absent (`rods gateway` sets it). */
  reconcile?: ReconcileSettings;
  /** The operator's generator endpoint names, when the gateway can read them: others are refused (422). */
  generatorEndpoints?: readonly string[];
  /** Per-token limits (gateway/request-limits.ts); DEFAULT_LIMITS for what is absent. */
  limits?: Partial<GatewayLimits>;
  /** Where request rate, errors and duration are counted (gateway/metrics.ts); none when absent. */
  metrics?: Registry;
  /** The dashboard's built page and the Temporal UI it links to (gateway/dashboard.ts). */
  dashboard?: Pick<DashboardOptions, 'dir' | 'temporalUiUrl' | 'namespace'>;
}

/**
 * What a route asks of the caller: nothing (`open`), the admin scope, or a scope over the
 * campaign of its `:id` (`campaign-read`: read, campaign:<id> or admin; `campaign-write`:
 * campaign:<id> or admin), or any valid token (`authenticated`: the route filters by scope). A
 * route that declares nothing needs admin.
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

function requirement(req: FastifyRequest, access: Access | undefined): Requirement {
  const campaignId = String((req.params as { id?: unknown } | undefined)?.id ?? '');
  if (access === 'campaign-read') return { kind: 'campaign-read', campaignId };
  if (access === 'campaign-write') return { kind: 'campaign-write', campaignId };
  if (access === 'authenticated') return { kind: 'authenticated' };
  return { kind: 'admin' };
}

/** Whether a workflow with this id exists (running or closed, within retention). */
/** pino redact paths: bearer tokens and (refused, but maybe logged) generator credentials. */
export const LOG_REDACT = [
  'req.headers.authorization',
  'headers.authorization',
  '*.generator.apiKey',
  '*.generator.headers',
  '*.*.generator.apiKey',
  '*.*.generator.headers',
];

export function buildGateway(opts: GatewayOptions): FastifyInstance {
  const app = Fastify({
    bodyLimit: opts.bodyLimit ?? DEFAULT_BODY_LIMIT,
    // Credentials never reach the log, wherever a serializer might put them.
    logger: opts.logLevel ? { level: opts.logLevel, redact: LOG_REDACT } : false,
    genReqId: () => randomUUID(),
  });
  // JSON only: any other media type (fastify also parses text/plain by default) is a 415.
  app.removeContentTypeParser('text/plain');
  if (opts.metrics) instrumentGateway(app, opts.metrics);
  const db = opts.db;
  const pollMs = opts.pollMs ?? 250;
  const limits: GatewayLimits = { ...DEFAULT_LIMITS, ...opts.limits };
  const longPolls = new LongPolls(limits.maxLongPollsPerToken);
  // One Kafka admin and dead-letter tail for every status call of this process, opened on the
  // first one (a gateway nobody asks for status opens none).
  let statusKafka: StatusKafka | undefined;
  const sharedStatusKafka = () => {
    statusKafka ??= new StatusKafka(campaignOf);
    return statusKafka;
  };
  app.addHook('onClose', async () => statusKafka?.close());
  if (opts.reconcile) {
    const reconciler = new BatchReconciler({
      ...opts.reconcile,
      db,
      temporal: opts.temporal,
      taskQueue: opts.taskQueue,
      rewardsTopic: opts.rewardsTopic,
      log: app.log,
    });
    app.addHook('onReady', async () => reconciler.start());
    app.addHook('onClose', async () => reconciler.stop());
  }

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
      const detail =
        status === 413
          ? `request body exceeds the limit of ${opts.bodyLimit ?? DEFAULT_BODY_LIMIT} bytes`
          : err.message;
      return sendProblem(reply, problem(status, detail));
    }
    req.log.error({ err }, 'request failed');
    return sendProblem(
      reply,
      problem(status >= 500 && status < 600 ? status : 500, `internal error (request ${req.id})`),
    );
  });
  app.setNotFoundHandler((req, reply) =>
    sendProblem(reply, problem(404, `no route ${req.method} ${req.url.split('?')[0]}`)),
  );

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
    const access = req.routeOptions.config?.access;
    if (access === 'open') return;
    const header = req.headers.authorization;
    const token = bearerToken(header);
    req.principal = token === undefined ? undefined : opts.tokens.identify(token);
    await rateLimited?.(req, reply);
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

  const requireCampaign = async (campaignId: string) => {
    const c = await loadCampaign(db, campaignId);
    if (!c)
      throw new ProblemError(
        404,
        `unknown campaign ${JSON.stringify(campaignId)}`,
        undefined,
        'unknown-campaign',
      );
    return c;
  };

  const open = { config: { access: 'open' as const } };
  const admin = { config: { access: 'admin' as const } };
  const campaignRead = { config: { access: 'campaign-read' as const } };
  const campaignWrite = { config: { access: 'campaign-write' as const } };

  app.get('/healthz', open, async () => ({ ok: true }));
  // Ready only while PostgreSQL answers (every API call but these two needs it).
  // Ready when both stores of the write path answer: PostgreSQL (batches) and Temporal (their
  // ingestion workflows). Either down: 503 naming it, while the process keeps running.
  app.get('/readyz', open, async (_req, reply) => {
    if (!(await ping(db)))
      return sendProblem(reply, problem(503, 'PostgreSQL is unreachable', undefined, 'database-unavailable'));
    const temporal = await opts.temporal.connection
      .withDeadline(Date.now() + 2000, () => opts.temporal.workflowService.getSystemInfo({}))
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
  app.get('/openapi.json', open, async () => openApiDocument());

  app.post('/v1/campaigns', admin, async (req, reply) => {
    const body = parseOr422(CampaignCreate, req.body, 'campaign');
    // Valid, and naming an operator endpoint instead of carrying a URL, key or header.
    parseOr422(NewCampaignConfigSchema, body.config, 'campaign config', 'config');
    try {
      const started = await startCampaign(
        {
          db,
          temporal: opts.temporal,
          taskQueue: opts.taskQueue,
          ...(opts.generatorEndpoints ? { generatorEndpoints: opts.generatorEndpoints } : {}),
        },
        {
          campaignId: body.campaignId,
          name: body.name,
          config: body.config,
          untilStep: body.untilStep,
          actor: 'gateway',
        },
      );
      return reply.code(201).send(started);
    } catch (e) {
      if (e instanceof CampaignExistsError)
        throw new ProblemError(409, e.message, undefined, 'campaign-exists');
      if (e instanceof UnknownGeneratorEndpointError)
        throw new ProblemError(422, `invalid campaign config: config.generator.endpoint: ${e.message}`, [
          { field: 'config.generator.endpoint', message: e.message },
        ]);
      throw e;
    }
  });

  app.get('/v1/campaigns/:id', campaignRead, async (req) => {
    const { id } = parseOr422(CampaignParams, req.params, 'path');
    const q = parseOr422(CampaignStatusQuery, req.query, 'query');
    // Never waits on a missing worker: the projections answer (status/campaign-status.ts).
    const r = await campaignStatus({ db, temporal: opts.temporal, statusKafka: sharedStatusKafka() }, id, {
      holds: q.holds !== 'false',
      queryTimeoutMs: opts.queryTimeoutMs ?? 5000,
      rewardsTopic: opts.rewardsTopic,
      ...opts.status,
    });
    if (!r) return requireCampaign(id);
    const workflowError = r.workflow ? null : (r.errors.query ?? r.errors.temporal ?? r.worker.detail);
    // A config recorded before endpoints existed may carry a generator URL or key: never shown.
    const workflow = r.workflow
      ? { ...r.workflow, config: redactCampaignConfig(r.workflow.config) }
      : r.workflow;
    return { ...r, workflow, workflowError };
  });

  app.post('/v1/campaigns/:id/steps/:step/rollouts', campaignWrite, async (req, reply) => {
    const { id, step } = parseOr422(StepParams, req.params, 'path');
    const batch = parseOr422(RolloutBatch, req.body, 'rollout batch');
    const receivedAt = Date.now();
    // The campaign (404), its limits and the batch's acceptance: one transaction (gateway/ingest.ts).
    const accepting = acceptBatch(db, id, step, batch, receivedAt);
    // The records are encoded while the transaction runs (unused if it finds a duplicate or refuses).
    let records: OutgoingRecord[] | undefined;
    if (opts.publisher) {
      accepting.catch(() => {});
      records = await opts.publisher
        .encodeGroups({ campaignId: id, step, ...batch, receivedAt })
        .catch(() => undefined);
    }
    const accepted = await accepting;
    const out = { workflowId: accepted.workflowId, groups: accepted.groups, close: accepted.close };
    // A new batch is published here; its ingestion workflow runs only when that fails.
    if (!accepted.duplicate && opts.publisher && (await opts.publisher.publish(accepted, records, req.log)))
      return reply.code(202).send({ ...out, duplicate: false, published: true });
    if (accepted.duplicate && accepted.published)
      return reply.code(200).send({ ...out, duplicate: true, published: true });
    const input: IngestionInput = { claimId: accepted.claimId, topic: opts.rewardsTopic ?? REWARDS_TOPIC };
    // Started for every batch not yet published, duplicates included: a batch recorded by a
    // request whose publish and start failed gets its workflow on the retry (or from the
    // reconciler, gateway/reconcile.ts); a workflow that exists is never started twice.
    let started = false;
    try {
      await opts.temporal.workflow.start(ingestionWorkflow, {
        taskQueue: opts.taskQueue,
        workflowId: accepted.workflowId,
        workflowIdReusePolicy: WorkflowIdReusePolicy.REJECT_DUPLICATE,
        args: [input],
      });
      started = true;
    } catch (e) {
      if (!(e instanceof WorkflowExecutionAlreadyStartedError)) {
        req.log.error({ err: e }, 'cannot start the ingestion workflow');
        throw new ProblemError(
          503,
          `batch ${batch.batchId} is recorded but its ingestion could not start: retry the same request`,
        );
      }
    }
    if (accepted.duplicate && !started)
      return reply.code(200).send({ ...out, duplicate: true, published: false });
    return reply.code(202).send({ ...out, duplicate: false, published: false });
  });

  app.get('/v1/campaigns/:id/pool', campaignRead, async (req, reply) => {
    const { id } = parseOr422(CampaignParams, req.params, 'path');
    const { wait } = parseOr422(PoolQuery, req.query, 'query');
    await requireCampaign(id);
    const inm = parseIfNoneMatch(req.headers['if-none-match']);
    const matches = (v: number) => inm.any || inm.versions.includes(v);
    let version = await poolVersion(db, id);
    if (matches(version) && wait && wait > 0) {
      // Each held long-poll costs a connection and a query per poll: a bounded number per token.
      const key = req.principal?.label ?? '';
      if (!longPolls.acquire(key)) {
        reply.header('Retry-After', '1');
        throw new ProblemError(
          429,
          `this token already holds ${limits.maxLongPollsPerToken} pool long-polls (${LIMIT_ENV.maxLongPollsPerToken}); retry when one returns, or poll without wait`,
          undefined,
          'too-many-long-polls',
          { maxLongPolls: limits.maxLongPollsPerToken },
        );
      }
      const ac = new AbortController();
      const onClose = () => ac.abort();
      req.raw.on('close', onClose);
      const deadline = Date.now() + wait * 1000;
      try {
        while (matches(version) && Date.now() < deadline && !ac.signal.aborted) {
          await sleep(Math.min(pollMs, Math.max(0, deadline - Date.now())));
          version = await poolVersion(db, id);
        }
      } finally {
        req.raw.off('close', onClose);
        longPolls.release(key);
      }
    }
    if (matches(version)) return reply.code(304).header('ETag', `"${version}"`).send();
    const p = await activePool(db, id);
    if (matches(p.version)) return reply.code(304).header('ETag', `"${p.version}"`).send();
    return reply.header('ETag', `"${p.version}"`).header('Cache-Control', 'no-cache').send(p);
  });

  app.get('/v1/campaigns/:id/batch', campaignRead, async (req, reply) => {
    const { id } = parseOr422(CampaignParams, req.params, 'path');
    const q = parseOr422(BatchQuery, req.query, 'query');
    if (q.n > limits.maxBatchN) {
      const message = `n must be an integer in [1, ${limits.maxBatchN}] (${LIMIT_ENV.maxBatchN})`;
      throw new ProblemError(422, `invalid query: n: ${message}`, [{ field: 'n', message }], undefined, {
        maxN: limits.maxBatchN,
      });
    }
    await requireCampaign(id);
    const p = await activePool(db, id);
    if (p.tasks.length === 0)
      throw new ProblemError(409, `the active pool of campaign ${id} is empty`, undefined, 'empty-pool');
    const seed = q.seed ?? randomUUID();
    const drawn = sample(p.tasks, q.n, `${p.version}/${seed}`);
    // The body stays under maxBatchBytes: the first draws that fit (a prefix of the same seeded
    // sample), `truncated` when some were left out; the trainer asks again for the rest.
    const envelope = { campaignId: id, version: p.version, seed, n: q.n, requested: q.n, truncated: false };
    const most = { ...envelope, maxBytes: limits.maxBatchBytes, tasks: [] };
    const tasks = fitTasks(drawn, Buffer.byteLength(JSON.stringify(most), 'utf8'), limits.maxBatchBytes);
    const truncated = tasks.length < drawn.length;
    return reply.header('ETag', `"${p.version}"`).send({
      ...envelope,
      n: tasks.length,
      truncated,
      ...(truncated ? { maxBytes: limits.maxBatchBytes } : {}),
      tasks,
    });
  });

  registerDashboard(app, {
    db,
    temporal: opts.temporal,
    ...opts.dashboard,
    statusKafka: sharedStatusKafka,
    status: { rewardsTopic: opts.rewardsTopic, queryTimeoutMs: opts.queryTimeoutMs, ...opts.status },
  });

  return app;
}
