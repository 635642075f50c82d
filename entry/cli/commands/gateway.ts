// `rods gateway`: the trainer-facing HTTP API (entry/gateway/server.ts) until SIGTERM.
import type { Command } from 'commander';
import { loadGeneratorEndpoints } from '../../../activities/llm/endpoints.js';
import { registerPipelineGauges } from '../../../analysis/status/metrics.js';
import { openKafka } from '../../../platform/kafka/client.js';
import { SharedProducer } from '../../../platform/kafka/shared-producer.js';
import { REWARDS_TOPIC } from '../../../platform/kafka/topology.js';
import { createPool } from '../../../platform/store/db.js';
import { migrateWhenReachable } from '../../../platform/store/migrate.js';
import { taskQueue, temporalClient } from '../../../platform/temporal/connect.js';
import { processRegistry, serveMetrics } from '../../../platform/util/metrics.js';
import { loadTokens, TokenSet } from '../../gateway/auth.js';
import { manifestConcurrencyFromEnv } from '../../gateway/manifest-queue.js';
import { DirectPublisher } from '../../gateway/publish.js';
import { DEFAULT_RECONCILE_GRACE_MS, DEFAULT_RECONCILE_INTERVAL_MS } from '../../gateway/reconcile.js';
import { type GatewayLimits, limitsFromEnv } from '../../gateway/request-limits.js';
import { buildGateway, DEFAULT_BODY_LIMIT, DEFAULT_PORT } from '../../gateway/server.js';
import { GatewayTls, isLoopbackHost, tlsFilesFor } from '../../gateway/tls.js';
import { UsageError } from '../errors.js';
import { intOption } from '../options.js';

export function register(program: Command): void {
  program
    .command('gateway')
    .description(
      'serve the HTTP API for trainers: campaigns, rollout ingestion, the active pool (OpenAPI at /openapi.json)',
    )
    .option(
      '--port <n>',
      'listen port (RODS_GATEWAY_PORT)',
      intOption('--port'),
      Number(process.env.RODS_GATEWAY_PORT ?? DEFAULT_PORT),
    )
    .option(
      '--host <addr>',
      'listen address (RODS_GATEWAY_HOST); beyond loopback it needs --tls-cert/--tls-key or --insecure-http',
      process.env.RODS_GATEWAY_HOST ?? '127.0.0.1',
    )
    .option(
      '--tls-cert <file>',
      'serve HTTPS with this PEM certificate (leaf first, then intermediates); re-read when it changes, so a rotated certificate needs no restart (RODS_GATEWAY_TLS_CERT)',
      process.env.RODS_GATEWAY_TLS_CERT || undefined,
    )
    .option(
      '--tls-key <file>',
      "the certificate's PEM private key (RODS_GATEWAY_TLS_KEY)",
      process.env.RODS_GATEWAY_TLS_KEY || undefined,
    )
    .option(
      '--tls-client-ca <file>',
      'require a client certificate that chains to this PEM CA (mutual TLS; RODS_GATEWAY_TLS_CLIENT_CA)',
      process.env.RODS_GATEWAY_TLS_CLIENT_CA || undefined,
    )
    .option(
      '--insecure-http',
      'allow plain HTTP on an address beyond loopback, e.g. behind a proxy that terminates TLS (RODS_GATEWAY_INSECURE_HTTP=1)',
      process.env.RODS_GATEWAY_INSECURE_HTTP === '1',
    )
    .option(
      '--tokens <file>',
      'bearer tokens and their scopes, `<token> admin|read|campaign:<id> ...` a line (RODS_GATEWAY_TOKENS_FILE; else RODS_GATEWAY_TOKENS, comma-separated admin tokens)',
    )
    .option(
      '--body-limit <bytes>',
      'maximum request body (RODS_GATEWAY_BODY_LIMIT)',
      intOption('--body-limit'),
      Number(process.env.RODS_GATEWAY_BODY_LIMIT ?? DEFAULT_BODY_LIMIT),
    )
    .option('--task-queue <name>', 'task queue of the rods worker (RODS_TASK_QUEUE)', taskQueue())
    .option('--rewards-topic <name>', 'topic the ingestion publishes to', REWARDS_TOPIC)
    .option('--relay-name <name>', 'relay whose lag campaign status and the dashboard show', 'main')
    .option(
      '--aggregator-group <id>',
      "the aggregators' consumer group (campaign status, dashboard)",
      'rods-aggregator',
    )
    .option(
      '--reconcile-interval <s>',
      'seconds between two passes of the reconciler of accepted but unpublished batches (RODS_RECONCILE_INTERVAL_S)',
      intOption('--reconcile-interval'),
      Number(process.env.RODS_RECONCILE_INTERVAL_S ?? DEFAULT_RECONCILE_INTERVAL_MS / 1000),
    )
    .option(
      '--reconcile-grace <s>',
      'age in seconds after which an accepted batch still unpublished is published by the reconciler (RODS_RECONCILE_GRACE_S)',
      intOption('--reconcile-grace'),
      Number(process.env.RODS_RECONCILE_GRACE_S ?? DEFAULT_RECONCILE_GRACE_MS / 1000),
    )
    .option(
      '--metrics-port <port>',
      "serve Prometheus metrics (requests by route and status, the pipeline's gauges) on 127.0.0.1:PORT/metrics",
      intOption('--metrics-port'),
    )
    .action(
      async (opts: {
        metricsPort?: number;
        port: number;
        host: string;
        tlsCert?: string;
        tlsKey?: string;
        tlsClientCa?: string;
        insecureHttp: boolean;
        tokens?: string;
        bodyLimit: number;
        taskQueue: string;
        rewardsTopic: string;
        relayName: string;
        aggregatorGroup: string;
        reconcileInterval: number;
        reconcileGrace: number;
      }) => {
        if (!(opts.reconcileInterval >= 1))
          throw new UsageError(
            `--reconcile-interval must be at least 1 second, got ${opts.reconcileInterval}`,
          );
        if (!(opts.reconcileGrace >= 0))
          throw new UsageError(
            `--reconcile-grace must be a non-negative integer, got ${opts.reconcileGrace}`,
          );
        // Before anything connects: plain HTTP beyond loopback is refused, TLS files are checked.
        let tls: GatewayTls | undefined;
        try {
          const files = tlsFilesFor(opts);
          tls = files ? GatewayTls.load(files) : undefined;
        } catch (e) {
          throw new UsageError((e as Error).message);
        }
        let tokens: TokenSet;
        try {
          const loaded = loadTokens({ file: opts.tokens });
          tokens = new TokenSet(loaded.entries);
          for (const w of loaded.warnings) console.error(`rods gateway: warning: ${w}`);
        } catch (e) {
          throw new UsageError(
            `${(e as Error).message}: pass --tokens <file>, set RODS_GATEWAY_TOKENS_FILE or RODS_GATEWAY_TOKENS`,
          );
        }
        let limits: GatewayLimits;
        let manifestConcurrency: number;
        try {
          limits = limitsFromEnv();
          manifestConcurrency = manifestConcurrencyFromEnv();
        } catch (e) {
          throw new UsageError((e as Error).message);
        }
        // With the workers' endpoints file at hand, campaigns naming another endpoint get a 422.
        let generatorEndpoints: string[] | undefined;
        try {
          if (process.env.RODS_GENERATOR_ENDPOINTS_FILE)
            generatorEndpoints = loadGeneratorEndpoints().names();
        } catch (e) {
          throw new UsageError((e as Error).message);
        }
        await migrateWhenReachable();
        const db = createPool({ application: 'rods-gateway', max: 20 });
        const { client, close } = await temporalClient({ lazy: true });
        const metrics = opts.metricsPort !== undefined ? processRegistry() : undefined;
        if (metrics) registerPipelineGauges(db, metrics);
        // Accepted batches are published by the gateway itself; their workflows are the fallback.
        const producer = new SharedProducer(() => openKafka({ clientId: 'rods-gateway' }));
        void producer.warm();
        const app = buildGateway({
          db,
          temporal: client,
          tokens,
          taskQueue: opts.taskQueue,
          bodyLimit: opts.bodyLimit,
          rewardsTopic: opts.rewardsTopic,
          publisher: new DirectPublisher({ db, producer, topic: opts.rewardsTopic }),
          logLevel: process.env.RODS_LOG_LEVEL ?? 'info',
          reconcile: { intervalMs: opts.reconcileInterval * 1000, graceMs: opts.reconcileGrace * 1000 },
          limits,
          manifestConcurrency,
          generatorEndpoints,
          status: { relayName: opts.relayName, aggregatorGroup: opts.aggregatorGroup },
          metrics,
          tls,
        });
        if (!tls && isLoopbackHost(opts.host))
          app.log.info({ tls: 'http' }, 'gateway serves plain http on loopback');
        else if (!tls)
          app.log.warn(
            { tls: 'http' },
            `gateway serves plain http on ${opts.host} (--insecure-http): put a proxy that terminates TLS in front of it`,
          );
        const metricsServer = metrics
          ? await serveMetrics({ registry: metrics, port: opts.metricsPort! })
          : undefined;
        const address = await app.listen({ port: opts.port, host: opts.host });
        const mode = tls ? `, ${tls.mode}` : '';
        console.error(
          `rods gateway on ${address} (${tokens.size} token(s), task queue ${opts.taskQueue}${mode})`,
        );
        console.error(`rods gateway: dashboard at ${address}/dashboard/ (it asks for a token)`);
        await new Promise<void>((resolve) => {
          process.once('SIGTERM', resolve);
          process.once('SIGINT', resolve);
        });
        await app.close();
        await producer.close();
        await metricsServer?.close();
        await close();
        await db.end();
      },
    );
}
