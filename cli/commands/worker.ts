import type { Command } from 'commander';
import { createPool } from '../../store/db.js';
import { migrateWhenReachable } from '../../store/migrate.js';
import { installWorkerRuntime, waitForTemporal } from '../../temporal/connect.js';
import { createRodsWorker, taskQueue } from '../../temporal/worker.js';

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
    .action(async (opts: { taskQueue: string; sinkDir: string }) => {
      await migrateWhenReachable();
      await waitForTemporal();
      await installWorkerRuntime((process.env.RODS_TEMPORAL_LOG_LEVEL as 'WARN') ?? 'WARN');
      const pool = createPool({ application: 'rods-worker', max: 10 });
      const { worker, close } = await createRodsWorker({
        pool,
        taskQueue: opts.taskQueue,
        sinkDir: opts.sinkDir,
      });
      const stop = () => worker.shutdown();
      process.once('SIGTERM', stop);
      process.once('SIGINT', stop);
      console.error(`rods worker on task queue ${opts.taskQueue}`);
      await worker.run();
      await close();
      await pool.end();
    });
}
