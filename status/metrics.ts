// The pipeline's gauges, read from PostgreSQL's projections at each scrape of the gateway's
// /metrics: per recent campaign, its steps, pool, bands, candidates and unpublished batches.
// Only campaigns that moved in the last `windowHours` count, so the label sets stay small.
import type pg from 'pg';
import client from 'prom-client';

export interface PipelineGaugeOptions {
  /** Campaigns whose pool or registry row changed within this many hours (default 24). */
  windowHours?: number;
  /** At most this many campaigns, the most recently active first (default 50). */
  maxCampaigns?: number;
}

interface Row {
  campaign_id: string;
  k: string | null;
  n: string | number;
}

export function registerPipelineGauges(
  db: pg.Pool,
  registry: client.Registry,
  opts: PipelineGaugeOptions = {},
): void {
  const gauge = (name: string, help: string, labelNames: string[]) =>
    new client.Gauge({ name, help, labelNames, registers: [registry], collect: () => collect() });
  const step = gauge('rods_campaign_last_closed_step', 'the last training step the aggregators closed', [
    'campaign',
  ]);
  const planned = gauge('rods_campaign_last_planned_step', 'the last step the campaign workflow planned', [
    'campaign',
  ]);
  const pool = gauge(
    'rods_campaign_pool_tasks',
    'active tasks in the trainer pool, by origin (seed, generated)',
    ['campaign', 'origin'],
  );
  const bands = gauge('rods_campaign_tasks', 'tasks with statistics, by band (hard, boundary, mastered)', [
    'campaign',
    'band',
  ]);
  const candidates = gauge(
    'rods_campaign_candidates',
    'synthesized candidates by status (validated: waiting to be injected, injected, rejected)',
    ['campaign', 'status'],
  );
  const unpublished = gauge(
    'rods_campaign_unpublished_batches',
    'rollout batches accepted by the gateway and not yet published to Kafka',
    ['campaign'],
  );
  const scrapeErrors = new client.Counter({
    name: 'rods_pipeline_gauge_errors_total',
    help: 'scrapes whose pipeline gauges could not be read (PostgreSQL away); the gauges keep their last values',
    registers: [registry],
  });
  const all = [step, planned, pool, bands, candidates, unpublished];
  const hours = opts.windowHours ?? 24;
  const max = opts.maxCampaigns ?? 50;

  // One read fills every gauge: a scrape collects all gauges at once, and they share it.
  let pending: Promise<void> | undefined;
  function collect(): Promise<void> {
    pending ??= load().finally(() => {
      pending = undefined;
    });
    return pending;
  }
  const load = async () => {
    let ids: string[];
    const results: Row[][] = [];
    try {
      ids = (
        await db.query<{ campaign_id: string }>(
          `select c.campaign_id from campaigns c left join pool_versions v using (campaign_id)
            where greatest(c.updated_at, coalesce(v.updated_at, c.created_at)) > now() - make_interval(hours => $1)
            order by greatest(c.updated_at, coalesce(v.updated_at, c.created_at)) desc limit $2`,
          [hours, max],
        )
      ).rows.map((r) => r.campaign_id);
      const q = async (sql: string) => (await db.query<Row>(sql, [ids])).rows;
      results.push(
        await q(`select campaign_id, null as k, max(step) as n from steps
                  where campaign_id = any($1) and closed_at is not null group by 1`),
        await q(`select campaign_id, null as k, max(step) as n from campaign_plans
                  where campaign_id = any($1) group by 1`),
        await q(`select campaign_id, origin as k, count(*) as n from pool_members
                  where campaign_id = any($1) and active group by 1, 2`),
        await q(`select campaign_id, band as k, count(*) as n from task_stats
                  where campaign_id = any($1) group by 1, 2`),
        await q(`select campaign_id, status as k, count(*) as n from candidates
                  where campaign_id = any($1) group by 1, 2`),
        await q(`select campaign_id, null as k, count(*) as n from ingestion_batches
                  where campaign_id = any($1) and status = 'accepted' group by 1`),
      );
    } catch {
      scrapeErrors.inc();
      return;
    }
    for (const g of all) g.reset();
    const second = [null, null, 'origin', 'band', 'status', null] as const;
    results.forEach((rows, i) => {
      const g = all[i]!;
      const key = second[i];
      for (const r of rows)
        g.set({ campaign: r.campaign_id, ...(key ? { [key]: r.k ?? '' } : {}) }, Number(r.n));
    });
    // A campaign without batches waiting shows 0, not nothing.
    const waiting = new Set(results[5]!.map((r) => r.campaign_id));
    for (const id of ids) if (!waiting.has(id)) unpublished.set({ campaign: id }, 0);
  };
}
