import type { Command } from 'commander';
import { EndpointConfigError, loadGeneratorEndpoints } from '../../../activities/llm/endpoints.js';
import { createRodsWorker } from '../../../activities/worker.js';
import { createPool } from '../../../platform/store/db.js';
import { migrateWhenReachable } from '../../../platform/store/migrate.js';
import { installWorkerRuntime, taskQueue, waitForTemporal } from '../../../platform/temporal/connect.js';
import { processRegistry, serveMetrics } from '../../../platform/util/metrics.js';
import { UsageError } from '../errors.js';
import { intOption, portOption } from '../options.js';

export function register(program: Command): void {
  program
    .command('worker')
    .description(
      'run the Temporal worker of the campaign and synthesis workflows and their activities (until SIGTERM)',
    )
    .option('--task-queue <name>', 'task queue (RODS_TASK_QUEUE)', taskQueue())
    .option(
      '--sink-dir <dir>',
      'folder of the JSONL pool sink (RODS_SINK_DIR)',
      process.env.RODS_SINK_DIR ?? 'reports/pool-sink',
    )
    .option(
      '--sink-keep <versions>',
      'pool version files kept per campaign in the sink, newest first (RODS_SINK_KEEP, default 20; 0: keep all)',
      intOption('--sink-keep'),
    )
    .option(
      '--metrics-port <port>',
      'serve Prometheus metrics (activity executions, failures and duration by type) on 127.0.0.1:PORT/metrics',
      portOption('--metrics-port'),
    )
    .action(async (opts: { taskQueue: string; sinkDir: string; sinkKeep?: number; metricsPort?: number }) => {
      // The operator's generator endpoints: read (and refused when invalid) before anything starts.
      let generatorEndpoints: ReturnType<typeof loadGeneratorEndpoints>;
      try {
        generatorEndpoints = loadGeneratorEndpoints();
      } catch (e) {
        if (e instanceof EndpointConfigError) throw new UsageError(e.message);
        throw e;
      }
      await migrateWhenReachable();
      await waitForTemporal();
      await installWorkerRuntime((process.env.RODS_TEMPORAL_LOG_LEVEL as 'WARN') ?? 'WARN');
      const pool = createPool({ application: 'rods-worker', max: 10 });
      const metrics = opts.metricsPort !== undefined ? processRegistry() : undefined;
      const { worker, close } = await createRodsWorker({
        pool,
        taskQueue: opts.taskQueue,
        sinkDir: opts.sinkDir,
        ...(opts.sinkKeep !== undefined ? { sinkKeep: opts.sinkKeep } : {}),
        generatorEndpoints,
        metrics,
      });
      const metricsServer = metrics
        ? await serveMetrics({
            registry: metrics,
            port: opts.metricsPort!,
            // Ready while the worker polls its task queue.
            ready: async () =>
              worker.getState() === 'RUNNING'
                ? { ok: true }
                : { ok: false, detail: `worker ${worker.getState()}` },
          })
        : undefined;
      const stop = () => worker.shutdown();
      process.once('SIGTERM', stop);
      process.once('SIGINT', stop);
      // Names and URLs only: keys and headers are never printed.
      const eps = generatorEndpoints.toJSON().map((e) => `${e.name} (${new URL(e.baseUrl).origin})`);
      console.error(`rods worker on task queue ${opts.taskQueue}; generator endpoints: ${eps.join(', ')}`);
      await worker.run();
      await metricsServer?.close();
      await close();
      await pool.end();
    });
}
