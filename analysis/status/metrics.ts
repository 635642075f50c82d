// The pipeline's gauges, read from PostgreSQL's projections at each scrape of the gateway's
// /metrics: per recent campaign, its steps, pool, bands, candidates and unpublished batches.
// Only campaigns that moved in the last `windowHours` count, so the label sets stay small.
import type pg from 'pg';
import client from 'prom-client';
import { lastPlannedSteps } from '../../platform/store/campaign-plans.js';
import { campaignTimes } from '../../platform/store/campaigns.js';
import type { CampaignCount } from '../../platform/store/db.js';
import { activeMembersByOrigin, candidatesByStatus, poolChangedAt } from '../../platform/store/pool/view.js';
import { unpublishedBatchCounts } from '../../platform/store/steps/batches.js';
import { lastClosedSteps } from '../../platform/store/steps/view.js';
import { tasksByBand } from '../../platform/store/task-stats/view.js';

export interface PipelineGaugeOptions {
  /** Campaigns whose pool or registry row changed within this many hours (default 24). */
  windowHours?: number;
  /** At most this many campaigns, the most recently active first (default 50). */
  maxCampaigns?: number;
}

/**
 * Campaigns changed (registry or pool) in the last `hours`, newest first, at most `max` of them:
 * a campaign's pool changes every step, its registry row only on a pause or a reconfiguration.
 */
async function recentlyActive(db: pg.Pool, hours: number, max: number): Promise<string[]> {
  const [campaigns, pools] = await Promise.all([campaignTimes(db), poolChangedAt(db)]);
  const since = Date.now() - hours * 3_600_000;
  return campaigns
    .map((c) => ({
      id: c.campaignId,
      at: Math.max(c.updatedAt.getTime(), (pools.get(c.campaignId) ?? c.createdAt).getTime()),
    }))
    .filter((c) => c.at > since)
    .sort((a, b) => b.at - a.at)
    .slice(0, max)
    .map((c) => c.id);
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
    const results: CampaignCount[][] = [];
    try {
      ids = await recentlyActive(db, hours, max);
      results.push(
        await lastClosedSteps(db, ids),
        await lastPlannedSteps(db, ids),
        await activeMembersByOrigin(db, ids),
        await tasksByBand(db, ids),
        await candidatesByStatus(db, ids),
        await unpublishedBatchCounts(db, ids),
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
