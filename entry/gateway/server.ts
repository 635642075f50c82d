// The gateway: the trainer's HTTP entry point. This file composes it: the problem handlers
// (every error is RFC 9457 problem+json), the token and rate-limit check (entry/gateway/access.ts),
// the 405s of methods a path does not declare (entry/gateway/routing.ts), the batch reconciler,
// and one module of routes per resource in entry/gateway/routes/ (health, campaigns, rollouts,
// pool) beside the dashboard's (entry/gateway/dashboard.ts).
import { randomUUID } from 'node:crypto';
import Fastify, { type FastifyInstance } from 'fastify';
import type { Registry } from 'prom-client';
import { campaignOf } from '../../analysis/status/kafka.js';
import { StatusKafka } from '../../analysis/status/kafka-shared.js';
import { registerAccess } from './access.js';
import type { TokenSet } from './auth.js';
import { registerBodySlots } from './body-slots.js';
import { type DashboardOptions, registerDashboard } from './dashboard.js';
import { ManifestQueue } from './manifest-queue.js';
import { instrumentGateway } from './metrics.js';
import { registerProblemHandlers } from './problem.js';
import { BatchReconciler, type ReconcileSettings } from './reconcile.js';
import { DEFAULT_BODY_LIMIT, DEFAULT_LIMITS, type GatewayLimits, LongPolls } from './request-limits.js';
import { registerCampaignRoutes } from './routes/campaigns.js';
import { registerCheckpointRoutes } from './routes/checkpoints.js';
import type { RouteContext } from './routes/context.js';
import { registerHealthRoutes } from './routes/health.js';
import { registerPoolRoutes } from './routes/pool.js';
import { registerRolloutRoutes } from './routes/rollouts.js';
import { declaredMethods, registerMethodNotAllowed } from './routing.js';
import type { GatewayTls } from './tls.js';

export { DEFAULT_BODY_LIMIT };
export const DEFAULT_PORT = 7500;

export interface GatewayOptions
  extends Pick<
      RouteContext,
      'db' | 'temporal' | 'taskQueue' | 'rewardsTopic' | 'publisher' | 'generatorEndpoints' | 'status'
    >,
    Partial<Pick<RouteContext, 'pollMs' | 'queryTimeoutMs'>> {
  tokens: TokenSet;
  /** Maximum request body in bytes (default 8 MiB). */
  bodyLimit?: number;
  logLevel?: string;
  /** Publish accepted batches left unpublished (entry/gateway/reconcile.ts); off when absent (`rods gateway` sets it). */
  reconcile?: ReconcileSettings;
  /** Per-token limits (entry/gateway/request-limits.ts); DEFAULT_LIMITS for what is absent. */
  limits?: Partial<GatewayLimits>;
  /** Where request rate, errors and duration are counted (entry/gateway/metrics.ts); none when absent. */
  metrics?: Registry;
  /** Checkpoint manifests computed at once (default 2; entry/gateway/manifest-queue.ts). */
  manifestConcurrency?: number;
  /** The dashboard's built page and the Temporal UI it links to (entry/gateway/dashboard.ts). */
  dashboard?: Pick<DashboardOptions, 'dir' | 'temporalUiUrl' | 'namespace'>;
  /** Serve HTTPS with these files, reloaded when they change (entry/gateway/tls.ts); plain HTTP when absent. */
  tls?: GatewayTls;
}

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
    ...(opts.tls ? { https: opts.tls.httpsOptions } : {}),
  });
  // HTTPS: the certificate files are watched while the gateway is up, a rotated pair taken live.
  opts.tls?.attach(app);
  // JSON only: any other media type (fastify also parses text/plain by default) is a 415.
  app.removeContentTypeParser('text/plain');
  if (opts.metrics) instrumentGateway(app, opts.metrics);
  const db = opts.db;
  const limits: GatewayLimits = { ...DEFAULT_LIMITS, ...opts.limits };
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

  registerProblemHandlers(app, db, opts.bodyLimit ?? DEFAULT_BODY_LIMIT);
  registerAccess(app, opts.tokens, limits);
  // After the token check: bodies over 1 MiB are read a few at a time (entry/gateway/body-slots.ts).
  registerBodySlots(app);
  // Every route's methods, so that a path asked with another one is a 405 (entry/gateway/routing.ts).
  const declared = declaredMethods(app);
  const ctx: RouteContext = {
    db,
    temporal: opts.temporal,
    taskQueue: opts.taskQueue,
    rewardsTopic: opts.rewardsTopic,
    publisher: opts.publisher,
    generatorEndpoints: opts.generatorEndpoints,
    limits,
    longPolls: new LongPolls(limits.maxLongPollsPerToken),
    manifests: new ManifestQueue(opts.manifestConcurrency),
    pollMs: opts.pollMs ?? 250,
    queryTimeoutMs: opts.queryTimeoutMs ?? 5000,
    status: opts.status,
    statusKafka: sharedStatusKafka,
  };
  registerHealthRoutes(app, ctx);
  registerCampaignRoutes(app, ctx);
  registerRolloutRoutes(app, ctx);
  registerPoolRoutes(app, ctx);
  registerCheckpointRoutes(app, ctx);
  registerDashboard(app, {
    db,
    temporal: opts.temporal,
    ...opts.dashboard,
    statusKafka: sharedStatusKafka,
    status: { rewardsTopic: opts.rewardsTopic, queryTimeoutMs: opts.queryTimeoutMs, ...opts.status },
  });
  // Last: after every route, the 405s of the methods they do not declare.
  registerMethodNotAllowed(app, declared);

  return app;
}
