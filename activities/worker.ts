// The rods worker: runs the campaign and synthesis workflows and all their activities on one
// task queue (the orchestration's composition root, beside the activities it registers). Several workers (processes or machines) may serve the same queue.
import { fileURLToPath } from 'node:url';
import { Client } from '@temporalio/client';
import { Worker, type WorkflowBundleWithSourceMap } from '@temporalio/worker';
import type pg from 'pg';
import type { Registry } from 'prom-client';
import { openKafka } from '../platform/kafka/client.js';
import { SharedProducer } from '../platform/kafka/shared-producer.js';
import { activityMetrics } from '../platform/temporal/activity-metrics.js';
import { taskQueue, temporalNamespace, workerConnection } from '../platform/temporal/connect.js';
import { createCampaignActivities } from './campaign.js';
import { createCurriculumActivities } from './curriculum.js';
import * as doctorActivities from './doctor.js';
import { createEvaluationActivities } from './evaluation.js';
import { ExecutorClient } from './executor-client.js';
import { createIngestionActivities } from './ingestion.js';
import type { GeneratorEndpoints } from './llm/endpoints.js';
import { sinkKeepFromEnv } from './pool-sink.js';
import { createSynthesisActivities } from './synthesis.js';

export const WORKFLOWS_PATH = fileURLToPath(new URL('../workflows/index.ts', import.meta.url));

export interface RodsWorkerOptions {
  pool: pg.Pool;
  taskQueue?: string;
  sinkDir?: string;
  /** Pool version files kept per campaign in the sink (default RODS_SINK_KEEP, else 20; 0: all). */
  sinkKeep?: number;
  /** A pre-built bundle (tests bundle once per file). */
  workflowBundle?: WorkflowBundleWithSourceMap;
  /** The operator's generator endpoints (default: from the worker's environment, activities/llm/endpoints.ts). */
  generatorEndpoints?: GeneratorEndpoints;
  maxConcurrentActivityTaskExecutions?: number;
  /** Where activity executions, failures and duration are counted (platform/temporal/activity-metrics.ts). */
  metrics?: Registry;
}

export function rodsActivities(opts: RodsWorkerOptions, temporal: Client, producer?: SharedProducer) {
  const executor = new ExecutorClient();
  return {
    ...createCampaignActivities({
      pool: opts.pool,
      executor,
      temporal,
      sinkDir: opts.sinkDir ?? process.env.RODS_SINK_DIR ?? 'reports/pool-sink',
      sinkKeep: opts.sinkKeep ?? sinkKeepFromEnv(),
    }),
    ...createCurriculumActivities({ pool: opts.pool, executor }),
    ...createSynthesisActivities({
      pool: opts.pool,
      executor,
      endpoints: opts.generatorEndpoints,
      metrics: opts.metrics,
    }),
    ...createIngestionActivities({ pool: opts.pool, ...(producer ? { producer } : {}) }),
    ...createEvaluationActivities({ pool: opts.pool, executor }),
  };
}

export async function createRodsWorker(
  opts: RodsWorkerOptions,
): Promise<{ worker: Worker; close: () => Promise<void> }> {
  const connection = await workerConnection();
  // One Kafka producer for the worker's ingestion activities, closed with the worker.
  const producer = new SharedProducer(() => openKafka({ clientId: 'rods-ingestion' }));
  const worker = await Worker.create({
    connection,
    namespace: temporalNamespace(),
    taskQueue: opts.taskQueue ?? taskQueue(),
    ...(opts.workflowBundle ? { workflowBundle: opts.workflowBundle } : { workflowsPath: WORKFLOWS_PATH }),
    // The activities' client shares the worker's connection.
    activities: rodsActivities(opts, new Client({ connection, namespace: temporalNamespace() }), producer),
    maxConcurrentActivityTaskExecutions: opts.maxConcurrentActivityTaskExecutions ?? 20,
    ...(opts.metrics ? { interceptors: { activity: [activityMetrics(opts.metrics)] } } : {}),
  });
  return {
    worker,
    close: async () => {
      await producer.close();
      await connection.close();
    },
  };
}

/** A worker of the doctor's one-activity round trip on its own task queue (rods doctor, benchmarks). */
export async function createDoctorWorker(
  taskQueue: string,
): Promise<{ worker: Worker; close: () => Promise<void> }> {
  const connection = await workerConnection();
  const worker = await Worker.create({
    connection,
    namespace: temporalNamespace(),
    taskQueue,
    workflowsPath: fileURLToPath(new URL('../workflows/doctor.ts', import.meta.url)),
    activities: doctorActivities,
  });
  return { worker, close: () => connection.close() };
}
