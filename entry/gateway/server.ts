// The gateway: the trainer's HTTP entry point. This file composes it: the problem handlers
// (every error is RFC 9457 problem+json), the token and rate-limit check (entry/gateway/access.ts), the
// batch reconciler, and one module of routes per resource in entry/gateway/routes/ (health, campaigns,
// rollouts, pool) beside the dashboard's (entry/gateway/dashboard.ts).
import { randomUUID } from 'node:crypto';
import type { Client } from '@temporalio/client';
import Fastify, { type FastifyInstance } from 'fastify';
import type pg from 'pg';
import type { Registry } from 'prom-client';
import type { StatusOptions } from '../../analysis/status/campaign-status.js';
import { campaignOf } from '../../analysis/status/kafka.js';
import { StatusKafka } from '../../analysis/status/kafka-shared.js';
import { registerAccess } from './access.js';
import type { TokenSet } from './auth.js';
import { type DashboardOptions, registerDashboard } from './dashboard.js';
import { instrumentGateway } from './metrics.js';
import { registerProblemHandlers } from './problem.js';
import type { DirectPublisher } from './publish.js';
import { BatchReconciler, type ReconcileSettings } from './reconcile.js';
import { DEFAULT_LIMITS, type GatewayLimits, LongPolls } from './request-limits.js';
import { registerCampaignRoutes } from './routes/campaigns.js';
import type { RouteContext } from './routes/context.js';
import { registerHealthRoutes } from './routes/health.js';
import { registerPoolRoutes } from './routes/pool.js';
import { registerRolloutRoutes } from './routes/rollouts.js';

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
   * Publishes new batches right after their commit (entry/gateway/publish.ts; give it the rewards
   * topic); absent, every batch goes through its ingestion workflow.
   */
  publisher?: DirectPublisher;
  /** Poll period of pool long-polls (default 250 ms). */
  pollMs?: number;
  /** How long a status query may wait for a worker once one polls (default 5 s). */
  queryTimeoutMs?: number;
  /** Where the campaign status looks for the relay and the aggregators (analysis/status/campaign-status.ts). */
  status?: Pick<StatusOptions, 'relayName' | 'aggregatorGroup' | 'synthesisTimeoutMs'>;
  logLevel?: string;
  /** Publish accepted batches left unpublished (entry/gateway/reconcile.ts); off when absent (`rods gateway` sets it). */
  reconcile?: ReconcileSettings;
  /** The operator's generator endpoint names, when the gateway can read them: others are refused (422). */
  generatorEndpoints?: readonly string[];
  /** Per-token limits (entry/gateway/request-limits.ts); DEFAULT_LIMITS for what is absent. */
  limits?: Partial<GatewayLimits>;
  /** Where request rate, errors and duration are counted (entry/gateway/metrics.ts); none when absent. */
  metrics?: Registry;
  /** The dashboard's built page and the Temporal UI it links to (entry/gateway/dashboard.ts). */
  dashboard?: Pick<DashboardOptions, 'dir' | 'temporalUiUrl' | 'namespace'>;
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
  });
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
  const ctx: RouteContext = {
    db,
    temporal: opts.temporal,
    taskQueue: opts.taskQueue,
    rewardsTopic: opts.rewardsTopic,
    publisher: opts.publisher,
    generatorEndpoints: opts.generatorEndpoints,
    limits,
    longPolls: new LongPolls(limits.maxLongPollsPerToken),
    pollMs: opts.pollMs ?? 250,
    queryTimeoutMs: opts.queryTimeoutMs ?? 5000,
    status: opts.status,
    statusKafka: sharedStatusKafka,
  };
  registerHealthRoutes(app, ctx);
  registerCampaignRoutes(app, ctx);
  registerRolloutRoutes(app, ctx);
  registerPoolRoutes(app, ctx);
  registerDashboard(app, {
    db,
    temporal: opts.temporal,
    ...opts.dashboard,
    statusKafka: sharedStatusKafka,
    status: { rewardsTopic: opts.rewardsTopic, queryTimeoutMs: opts.queryTimeoutMs, ...opts.status },
  });

  return app;
}
