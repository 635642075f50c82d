// The gateway as its int tests use it: through fastify's inject(), with a real PostgreSQL pool and
// Temporal client, and no worker on its task queue (the ingestion workflows it starts are
// terminated when the test file ends).
import type { Client } from '@temporalio/client';
import type { FastifyInstance } from 'fastify';
import { type TokenEntry, TokenSet } from '../../../entry/gateway/auth.js';
import type { GatewayLimits } from '../../../entry/gateway/request-limits.js';
import { buildGateway } from '../../../entry/gateway/server.js';
import { createPool, type Pool } from '../../../platform/store/db.js';
import { temporalClient } from '../../../platform/temporal/connect.js';

export interface GatewayUnderTest {
  db: Pool;
  client: Client;
  app: FastifyInstance;
  /** Terminates the ingestion workflows of these campaigns, then closes everything. */
  close(campaigns: readonly string[]): Promise<void>;
}

export async function startGatewayUnderTest(opts: {
  application: string;
  /** Plain strings are admin tokens. */
  tokens: (string | TokenEntry)[];
  taskQueue: string;
  limits?: Partial<GatewayLimits>;
  pollMs?: number;
  bodyLimit?: number;
}): Promise<GatewayUnderTest> {
  const db = createPool({ application: opts.application, max: 5 });
  const { client, close: closeClient } = await temporalClient();
  const app = buildGateway({
    db,
    temporal: client,
    tokens: new TokenSet(opts.tokens),
    taskQueue: opts.taskQueue,
    ...(opts.limits ? { limits: opts.limits } : {}),
    ...(opts.pollMs ? { pollMs: opts.pollMs } : {}),
    ...(opts.bodyLimit ? { bodyLimit: opts.bodyLimit } : {}),
  });
  await app.ready();
  return {
    db,
    client,
    app,
    async close(campaigns) {
      for (const c of campaigns) {
        const { rows } = await db.query<{ workflow_id: string }>(
          'select workflow_id from ingestion_batches where campaign_id = $1',
          [c],
        );
        for (const r of rows)
          await client.workflow
            .getHandle(r.workflow_id)
            .terminate('test over')
            .catch(() => {});
      }
      await app.close();
      await closeClient();
      await db.end();
    },
  };
}
