import { setTimeout as sleep } from 'node:timers/promises';
import type { Command } from 'commander';
import { BANDS, type Band } from '../../../domain/band.js';
import { loadCampaign } from '../../../platform/store/campaigns.js';
import { backoffMs, createPool, isConnectionError } from '../../../platform/store/db.js';
import { migrateWhenReachable } from '../../../platform/store/migrate.js';
import { WatermarkTimeout, waitForWatermark, watermark } from '../../../platform/store/steps/watermark.js';
import { queryStats } from '../../../platform/store/task-stats/view.js';
import { AggregatorService } from '../../../stages/aggregator/service.js';
import { DEFAULT_TASK_CACHE_SIZE } from '../../../stages/aggregator/task-cache.js';

/** A failure to reach Kafka or PostgreSQL (as opposed to a configuration error). */
function isUnreachable(e: unknown): boolean {
  const text = `${(e as Error)?.name ?? ''} ${(e as Error)?.message ?? ''}`;
  return (
    isConnectionError(e) || /KafkaJS|Connection error|ECONNREFUSED|ECONNRESET|coordinator|leader/i.test(text)
  );
}

import { UsageError } from '../errors.js';
import { intOption } from '../options.js';
import { printJson } from '../output.js';

async function requireCampaign(pool: ReturnType<typeof createPool>, campaignId: string): Promise<void> {
  if (!(await loadCampaign(pool, campaignId)))
    throw new UsageError(`unknown campaign ${JSON.stringify(campaignId)}`);
}

export function register(program: Command): void {
  program
    .command('aggregator')
    .description(
      'run the stream aggregator: exactly-once per-task reward statistics and band detection from rods.rewards.v1 (until SIGTERM)',
    )
    .option(
      '--group <id>',
      'Kafka consumer group (instances in one group share the partitions)',
      'rods-aggregator',
    )
    .option('--topic <topic>', 'reward topic', 'rods.rewards.v1')
    .option(
      '--metrics-port <port>',
      'serve Prometheus metrics on 127.0.0.1:PORT/metrics',
      intOption('--metrics-port'),
    )
    .option(
      '--dedupe-window <groups>',
      "how many of a task's most recent groups are remembered for duplicate detection",
      intOption('--dedupe-window'),
      64,
    )
    .option(
      '--task-cache <tasks>',
      'tasks whose statistics and dedupe window stay in memory between batches (re-checked against ' +
        'the stored row in every batch); 0 reads every task in full',
      intOption('--task-cache'),
      DEFAULT_TASK_CACHE_SIZE,
    )
    .option(
      '--session-timeout-ms <ms>',
      'how long a dead member keeps its partitions before the group rebalances (>= 6000)',
      intOption('--session-timeout-ms'),
      30_000,
    )
    .option(
      '--max-record-attempts <n>',
      'failed attempts at one record before it goes to the dead-letter topic and its partition moves on (>= 1)',
      intOption('--max-record-attempts'),
      3,
    )
    .action(
      async (opts: {
        group: string;
        topic: string;
        metricsPort?: number;
        dedupeWindow: number;
        taskCache: number;
        sessionTimeoutMs: number;
        maxRecordAttempts: number;
      }) => {
        if (opts.maxRecordAttempts < 1) throw new UsageError('--max-record-attempts must be at least 1');
        await migrateWhenReachable();
        const pool = createPool({ application: 'rods-aggregator', max: 6 });
        const service = () =>
          new AggregatorService(pool, {
            groupId: opts.group,
            topic: opts.topic,
            metricsPort: opts.metricsPort,
            dedupeWindow: opts.dedupeWindow,
            taskCache: opts.taskCache,
            sessionTimeoutMs: opts.sessionTimeoutMs,
            maxRecordAttempts: opts.maxRecordAttempts,
          });
        let stopping = false;
        const stopped = new Promise<void>((resolve) => {
          const stop = () => {
            stopping = true;
            resolve();
          };
          process.once('SIGTERM', stop);
          process.once('SIGINT', stop);
        });
        // Started during a Kafka outage (or a restart of the broker), the consumer cannot join its
        // group: wait and start again instead of exiting. Once running, the client rides it out.
        let svc = service();
        for (let attempt = 0; ; attempt++) {
          try {
            await svc.start();
            break;
          } catch (e) {
            await svc.stop();
            if (stopping || !isUnreachable(e)) throw e;
            console.error(`aggregator: cannot start (${(e as Error).message}); retrying ...`);
            await Promise.race([stopped, sleep(backoffMs(attempt, 10_000))]);
            if (stopping) break;
            svc = service();
          }
        }
        await stopped;
        await svc.stop();
        await pool.end();
      },
    );

  program
    .command('watermark')
    .description('report (or wait until) every reward event of steps <= S is reflected in the statistics')
    .requiredOption('--campaign <id>', 'campaign id')
    .requiredOption('--step <n>', 'training step', intOption('--step'))
    .option('--wait', 'block until the watermark reaches the step')
    .option('--timeout <sec>', 'give up waiting after this many seconds (exit 3)', intOption('--timeout'))
    .option('--json', 'JSON output')
    .action(
      async (opts: { campaign: string; step: number; wait?: boolean; timeout?: number; json?: boolean }) => {
        const pool = createPool({ application: 'rods-cli', max: 2 });
        try {
          await requireCampaign(pool, opts.campaign);
          const w = opts.wait
            ? await waitForWatermark(pool, opts.campaign, opts.step, {
                timeoutMs: opts.timeout !== undefined ? opts.timeout * 1000 : undefined,
              })
            : await watermark(pool, opts.campaign, opts.step);
          if (opts.json) printJson(w);
          else
            console.log(
              w.reached
                ? `step ${opts.step} aggregated`
                : `step ${opts.step} not aggregated yet (${w.open.length} open step(s))`,
            );
          if (!w.reached) process.exitCode = 3;
        } catch (e) {
          if (e instanceof WatermarkTimeout) {
            console.error(`rods: ${e.message}`);
            process.exitCode = 3;
            return;
          }
          throw e;
        } finally {
          await pool.end();
        }
      },
    );

  program
    .command('stats')
    .description('per-task reward statistics of a campaign')
    .requiredOption('--campaign <id>', 'campaign id')
    .option('--task <id>', 'one task')
    .option('--band <band>', `only tasks in this band (${BANDS.join('|')})`)
    .option(
      '--json',
      'JSON array of {campaignId, taskId, groups, rollouts, mean, variance, latestMean, latestVariance, ewma, phi, band, lastStep}',
    )
    .action(async (opts: { campaign: string; task?: string; band?: string; json?: boolean }) => {
      if (opts.band && !BANDS.includes(opts.band as Band)) {
        throw new UsageError(`--band must be one of ${BANDS.join(', ')}, got ${JSON.stringify(opts.band)}`);
      }
      const pool = createPool({ application: 'rods-cli', max: 2 });
      try {
        await requireCampaign(pool, opts.campaign);
        const rows = await queryStats(pool, {
          campaignId: opts.campaign,
          taskId: opts.task,
          band: opts.band as Band | undefined,
        });
        if (opts.task && rows.length === 0)
          throw new UsageError(`unknown task ${JSON.stringify(opts.task)} in campaign ${opts.campaign}`);
        if (opts.json) printJson(rows);
        else {
          console.log(
            'task'.padEnd(32),
            'band'.padEnd(9),
            'groups',
            'mean'.padStart(8),
            'latest'.padStart(8),
            'phi'.padStart(6),
            'step',
          );
          for (const r of rows) {
            console.log(
              r.taskId.padEnd(32),
              r.band.padEnd(9),
              String(r.groups).padStart(6),
              r.mean.toFixed(4).padStart(8),
              r.latestMean.toFixed(4).padStart(8),
              r.phi.toFixed(3).padStart(6),
              r.lastStep,
            );
          }
        }
      } finally {
        await pool.end();
      }
    });
}
