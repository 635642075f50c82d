// The gateway as its HTTP tests use it: listening on a loopback port, with an in-process rods
// worker on a private task queue and a fresh rewards topic, publishing accepted batches itself
// as `rods gateway` does (its fallback workflows run on the worker). Call it in beforeAll; close()
// terminates the given workflows and stops everything.

import { randomUUID } from 'node:crypto';
import { fileURLToPath } from 'node:url';
import type { Client } from '@temporalio/client';
import { bundleWorkflowCode, Runtime } from '@temporalio/worker';
import type { FastifyInstance } from 'fastify';
import { createRodsWorker } from '../../../activities/worker.js';
import { TokenSet } from '../../../entry/gateway/auth.js';
import { DirectPublisher } from '../../../entry/gateway/publish.js';
import { buildGateway } from '../../../entry/gateway/server.js';
import { GatewayTls } from '../../../entry/gateway/tls.js';
import { openKafka, withAdmin } from '../../../platform/kafka/client.js';
import { SharedProducer } from '../../../platform/kafka/shared-producer.js';
import { createPool, type Pool } from '../../../platform/store/db.js';
import { installWorkerRuntime, temporalClient } from '../../../platform/temporal/connect.js';
import { freshRewardTopic } from '../../../stages/aggregator/trace.js';

export interface GatewayWithWorker {
  db: Pool;
  client: Client;
  app: FastifyInstance;
  /** The gateway's base URL. */
  base: string;
  topic: string;
  taskQueue: string;
  /** The gateway's producer (its direct publish). */
  producer: SharedProducer;
  /** Terminates these workflows (ids), then stops the gateway, the worker and the clients. */
  close(workflowIds: readonly string[]): Promise<void>;
}

export async function startGatewayWithWorker(opts: {
  application: string;
  /** Admin tokens. */
  tokens: string[];
  /** Prefix of the fresh rewards topic and of the task queue. */
  name: string;
  partitions?: number;
  /** Publish every batch through its ingestion workflow (no direct publish). */
  workflowOnly?: boolean;
  /** Serve HTTPS with the files of RODS_GATEWAY_TLS_CERT / RODS_GATEWAY_TLS_KEY, as `rods gateway` does. */
  tlsFromEnv?: boolean;
}): Promise<GatewayWithWorker> {
  const { RODS_GATEWAY_TLS_CERT: cert, RODS_GATEWAY_TLS_KEY: key } = process.env;
  const tls = opts.tlsFromEnv && cert && key ? GatewayTls.load({ cert, key }) : undefined;
  await installWorkerRuntime('WARN');
  const bundle = await bundleWorkflowCode({
    logger: Runtime.instance().logger,
    workflowsPath: fileURLToPath(new URL('../../../workflows/index.ts', import.meta.url)),
  });
  const taskQueue = `${opts.name}-${randomUUID().slice(0, 8)}`;
  const db = createPool({ application: opts.application, max: 10 });
  const topic = await freshRewardTopic(`${opts.name}.rewards`, opts.partitions ?? 1);
  const w = await createRodsWorker({
    pool: db,
    taskQueue,
    workflowBundle: bundle,
    sinkDir: '.stack/test-sink',
  });
  const running = w.worker.run();
  const { client, close: closeClient } = await temporalClient();
  const producer = new SharedProducer(() => openKafka({ clientId: `${opts.name}-gateway` }));
  await producer.warm();
  const app = buildGateway({
    db,
    temporal: client,
    tokens: new TokenSet(opts.tokens),
    taskQueue,
    rewardsTopic: topic,
    ...(opts.workflowOnly ? {} : { publisher: new DirectPublisher({ db, producer, topic }) }),
    ...(tls ? { tls } : {}),
  });
  const listening = await app.listen({ port: 0, host: '127.0.0.1' });
  // Over HTTPS by the name the certificate carries (the secured stack's: localhost).
  const base = tls ? listening.replace('//127.0.0.1:', '//localhost:') : listening;
  return {
    db,
    client,
    app,
    base,
    topic,
    taskQueue,
    producer,
    async close(workflowIds) {
      for (const id of workflowIds)
        await client.workflow
          .getHandle(id)
          .terminate('test over')
          .catch(() => {});
      await app.close();
      await producer.close();
      w.worker.shutdown();
      await running;
      await w.close();
      await closeClient();
      await withAdmin((a) => a.deleteTopics([topic])).catch(() => {});
      await db.end();
    },
  };
}
