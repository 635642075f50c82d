// `rods gateway`: the trainer-facing HTTP API (gateway/server.ts) until SIGTERM.
import type { Command } from 'commander';
import { loadTokens, TokenSet } from '../../gateway/auth.js';
import { buildGateway, DEFAULT_BODY_LIMIT, DEFAULT_PORT } from '../../gateway/server.js';
import { REWARDS_TOPIC } from '../../kafka/topology.js';
import { createPool } from '../../store/db.js';
import { migrate } from '../../store/migrate.js';
import { temporalClient } from '../../temporal/connect.js';
import { taskQueue } from '../../temporal/worker.js';
import { UsageError } from '../errors.js';

const int = (what: string) => (v: string) => {
  const n = Number(v);
  if (!Number.isInteger(n) || n < 0) throw new UsageError(`${what} must be a non-negative integer, got ${v}`);
  return n;
};

export function register(program: Command): void {
  program
    .command('gateway')
    .description(
      'serve the HTTP API for trainers: campaigns, rollout ingestion, the active pool (OpenAPI at /openapi.json)',
    )
    .option(
      '--port <n>',
      'listen port (RODS_GATEWAY_PORT)',
      int('--port'),
      Number(process.env.RODS_GATEWAY_PORT ?? DEFAULT_PORT),
    )
    .option(
      '--host <addr>',
      'listen address (RODS_GATEWAY_HOST)',
      process.env.RODS_GATEWAY_HOST ?? '127.0.0.1',
    )
    .option('--tokens <file>', 'bearer tokens, one a line (default: RODS_GATEWAY_TOKENS, comma-separated)')
    .option(
      '--body-limit <bytes>',
      'maximum request body (RODS_GATEWAY_BODY_LIMIT)',
      int('--body-limit'),
      Number(process.env.RODS_GATEWAY_BODY_LIMIT ?? DEFAULT_BODY_LIMIT),
    )
    .option('--task-queue <name>', 'task queue of the rods worker (RODS_TASK_QUEUE)', taskQueue())
    .option('--rewards-topic <name>', 'topic the ingestion publishes to', REWARDS_TOPIC)
    .action(
      async (opts: {
        port: number;
        host: string;
        tokens?: string;
        bodyLimit: number;
        taskQueue: string;
        rewardsTopic: string;
      }) => {
        let tokens: TokenSet;
        try {
          tokens = new TokenSet(loadTokens({ file: opts.tokens }));
        } catch (e) {
          throw new UsageError(`${(e as Error).message}: pass --tokens <file> or set RODS_GATEWAY_TOKENS`);
        }
        await migrate();
        const db = createPool({ application: 'rods-gateway', max: 20 });
        const { client, close } = await temporalClient();
        const app = buildGateway({
          db,
          temporal: client,
          tokens,
          taskQueue: opts.taskQueue,
          bodyLimit: opts.bodyLimit,
          rewardsTopic: opts.rewardsTopic,
          logLevel: process.env.RODS_LOG_LEVEL ?? 'info',
        });
        const address = await app.listen({ port: opts.port, host: opts.host });
        console.error(`rods gateway on ${address} (${tokens.size} token(s), task queue ${opts.taskQueue})`);
        await new Promise<void>((resolve) => {
          process.once('SIGTERM', resolve);
          process.once('SIGINT', resolve);
        });
        await app.close();
        await close();
        await db.end();
      },
    );
}
