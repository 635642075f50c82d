// Activity executions, failures and duration by activity type, counted by a worker interceptor
// on the registry `rods worker --metrics-port` serves (platform/util/metrics.ts).
import { CancelledFailure } from '@temporalio/activity';
import type { ActivityInterceptorsFactory } from '@temporalio/worker';
import client from 'prom-client';

export function activityMetrics(registry: client.Registry): ActivityInterceptorsFactory {
  const executions = new client.Counter({
    name: 'rods_worker_activity_executions_total',
    help: 'activity executions (attempts) ended, by activity type and outcome (completed, failed, cancelled)',
    labelNames: ['activity', 'outcome'],
    registers: [registry],
  });
  const seconds = new client.Histogram({
    name: 'rods_worker_activity_seconds',
    help: 'duration of one activity execution (attempt), by activity type and outcome',
    labelNames: ['activity', 'outcome'],
    buckets: [0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300],
    registers: [registry],
  });
  const running = new client.Gauge({
    name: 'rods_worker_activities_running',
    help: 'activity executions in progress, by activity type',
    labelNames: ['activity'],
    registers: [registry],
  });
  return (ctx) => ({
    inbound: {
      async execute(input, next) {
        const activity = ctx.info.activityType;
        const end = seconds.startTimer({ activity });
        running.inc({ activity });
        let outcome = 'failed';
        try {
          const result = await next(input);
          outcome = 'completed';
          return result;
        } catch (e) {
          if (e instanceof CancelledFailure || ctx.cancellationSignal.aborted) outcome = 'cancelled';
          throw e;
        } finally {
          running.dec({ activity });
          end({ outcome });
          executions.inc({ activity, outcome });
        }
      },
    },
  });
}
