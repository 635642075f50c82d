// The exactly-once aggregator against a plain batch consumer (the Kafka port) that only decodes, over the same
// topic in the same run: {events_per_s, raw_consume_events_per_s, ratio, groups}, plus where the
// aggregator's time went (its batches' phases, its own CPU, the events it appended). Options:
// --groups, --tasks, --concurrency (partitions applied at once; the service's default 3),
// --profile DIR (a CPU profile of the aggregator phase and its top frames).
import { randomUUID } from 'node:crypto';
import { decode } from '../../platform/codec/registry.js';
import { openKafka, withAdmin } from '../../platform/kafka/client.js';
import { registerCampaign } from '../../platform/store/campaigns.js';
import { createPool } from '../../platform/store/db.js';
import { migrate } from '../../platform/store/migrate.js';
import { AggregatorService } from '../../stages/aggregator/service.js';
import { encodeRecord, freshRewardTopic, makeTrace, produceTrace } from '../../stages/aggregator/trace.js';
import { profiled } from './profile.js';
import type { BenchResult } from './result.js';

export default async function aggregatorBench(opts: Record<string, string | boolean>): Promise<BenchResult> {
  const groups = Number(opts.groups ?? 500_000);
  const tasks = Number(opts.tasks ?? 2000);
  const steps = Math.max(1, Math.ceil(groups / tasks));
  const log = (m: string) => opts.json || console.error(m);
  await migrate();
  const pool = createPool({ application: 'rods-bench-aggregator', max: 8 });
  const campaignId = `bench-${randomUUID().slice(0, 8)}`;
  await registerCampaign(pool, { campaignId });
  const topic = await freshRewardTopic('bench.rewards', 6);
  try {
    const trace = makeTrace({ campaignId, tasks, steps, seed: 1 });
    const records = trace.records.map((r) => encodeRecord(r, campaignId));
    log(`producing ${records.length} records (${trace.groups.length} groups of 16 rewards) ...`);
    await produceTrace(topic, records);
    const total = records.length;

    // Baseline: consume and decode every record, nothing else. Measured before and after the
    // aggregator, and the faster of the two counts: load that comes and goes on a shared
    // machine then cannot flatter the ratio.
    const rawConsume = async (): Promise<number> => {
      const c = openKafka({ clientId: 'bench-raw' }).batchConsumer({
        groupId: `bench-raw-${randomUUID()}`,
        topics: [topic],
        maxBytesPerPartition: 8 << 20,
      });
      let seen = 0;
      const t0 = performance.now();
      await new Promise<void>((resolve, reject) => {
        c.run(async (batch) => {
          for (const m of batch.records) decode(m.value!);
          seen += batch.records.length;
          if (seen >= total) resolve();
        }).catch(reject);
      });
      const s = (performance.now() - t0) / 1000;
      await c.disconnect();
      log(`raw consume+decode: ${(total / s).toFixed(0)} records/s`);
      return s;
    };
    const rawBefore = await rawConsume();

    // The aggregator: until every step is aggregated (every group applied and committed).
    const svc = new AggregatorService(pool, {
      groupId: `bench-agg-${campaignId}`,
      topic,
      logLevel: 'warn',
      // 1 makes batch_phase_seconds exact: with several partitions applied at once, one batch's
      // CPU work runs while another awaits PostgreSQL and is charged to that one's phase too.
      ...(opts.concurrency !== undefined ? { concurrency: Number(opts.concurrency) } : {}),
    });
    const cpu0 = process.cpuUsage();
    const t1 = performance.now();
    const { top } = await profiled(opts, 'aggregator', async () => {
      await svc.start();
      for (;;) {
        const { rows } = await pool.query<{ n: number }>(
          'select count(*)::int as n from steps where campaign_id = $1 and closed_at is not null',
          [campaignId],
        );
        if (rows[0]!.n >= steps) break;
        await new Promise((r) => setTimeout(r, 100));
      }
    });
    const aggSeconds = (performance.now() - t1) / 1000;
    const cpu = process.cpuUsage(cpu0);
    // Where the batches' time went (summed over the partitions applied at the same time).
    const phases = Object.fromEntries(
      (await svc.metrics.getSingleMetric('rods_aggregator_batch_phase_seconds_total')!.get()).values.map(
        (v) => [v.labels.phase, Number(v.value.toFixed(2))],
      ),
    );
    const statsEvents = (await svc.metrics.getSingleMetric('rods_aggregator_stats_events_total')!.get())
      .values[0]?.value;
    await svc.stop();
    const rawAfter = await rawConsume();
    const rawSeconds = Math.min(rawBefore, rawAfter);
    const eventsPerS = total / aggSeconds;
    const rawPerS = total / rawSeconds;
    return {
      groups: trace.groups.length,
      records: total,
      events_per_s: Math.round(eventsPerS),
      raw_consume_events_per_s: Math.round(rawPerS),
      ratio: Number((eventsPerS / rawPerS).toFixed(3)),
      aggregator_seconds: Number(aggSeconds.toFixed(2)),
      raw_seconds: Number(rawSeconds.toFixed(2)),
      raw_seconds_before_after: [Number(rawBefore.toFixed(2)), Number(rawAfter.toFixed(2))],
      // This process's CPU while the aggregator ran; PostgreSQL's share runs in its own processes.
      aggregator_process_cpu_seconds: Number(((cpu.user + cpu.system) / 1e6).toFixed(2)),
      stats_events_appended: statsEvents ?? 0,
      batch_phase_seconds: phases,
      ...(top ? { profile_top: top } : {}),
    };
  } finally {
    await withAdmin((a) => a.deleteTopics([topic]));
    await pool.end();
  }
}
