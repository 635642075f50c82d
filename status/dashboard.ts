// What the gateway's dashboard draws for a campaign (gateway/dashboard.ts), read from the
// projections and the event store: band counts and reward variance per closed step, the pool per
// planned step, the pool by origin and generation, the synthesis funnel (status/funnel.ts) with
// what became of the injected tasks, and each synthesis's latency. The live part (aggregator lag,
// dead letters, what a step waits for) is the campaign status (status/campaign-status.ts).
import type pg from 'pg';
import { type SynthesisFunnel, synthesisFunnel } from './funnel.js';

export interface StepPoint {
  step: number;
  closedAt: string | null;
  hard: number;
  boundary: number;
  mastered: number;
  /** Mean reward variance of the tasks of each band at that step (null: no task in the band). */
  varHard: number | null;
  varBoundary: number | null;
  varMastered: number | null;
  boundaryVarianceRatio: number | null;
}

export interface PoolPoint {
  step: number;
  version: number;
  active: number;
  seeds: number;
  generated: number;
}

export interface CompositionRow {
  origin: string;
  /** Generations from the human seed (0 for a seed). */
  depth: number;
  active: number;
  retired: number;
  pruned: number;
}

export interface SynthesisLatency {
  synthesisId: string;
  seedTaskId: string | null;
  step: number | null;
  outcome: 'validated' | 'rejected';
  reasonCode: string | null;
  /** From SynthesisStarted to the run's first outcome, as recorded in the store. */
  ms: number;
}

export interface DashboardSeries {
  campaignId: string;
  steps: StepPoint[];
  pool: PoolPoint[];
  composition: CompositionRow[];
  funnel: SynthesisFunnel & { retired: number; pruned: number };
  latency: SynthesisLatency[];
}

const num = (v: unknown): number | null => (typeof v === 'number' && Number.isFinite(v) ? v : null);

export async function dashboardSeries(db: pg.Pool, campaignId: string): Promise<DashboardSeries> {
  const [steps, plans, composition, latency, funnel] = await Promise.all([
    db.query<{ step: string; closed_at: Date | null; summary: Record<string, unknown> | null }>(
      `select step, closed_at, summary from steps
        where campaign_id = $1 and summary is not null order by step`,
      [campaignId],
    ),
    db.query<{ step: string; result: Record<string, unknown> }>(
      `select step, result - 'selected' - 'inputs' - 'injected' - 'retired' - 'pruned' as result
         from campaign_plans where campaign_id = $1 order by step`,
      [campaignId],
    ),
    db.query<CompositionRow>(
      `select origin, depth,
              count(*) filter (where active)::int as active,
              count(*) filter (where not active and removed_rule is distinct from 'pruned')::int as retired,
              count(*) filter (where not active and removed_rule = 'pruned')::int as pruned
         from pool_members where campaign_id = $1 group by 1, 2 order by 2, 1`,
      [campaignId],
    ),
    db.query<{
      synthesis_id: string;
      seed: string | null;
      step: string | null;
      type: string;
      reason: string | null;
      ms: number;
    }>(
      // Each run's first outcome (an Augment variant's outcomes come later under its own id).
      `with started as (
         select payload->>'synthesisId' as id, payload->>'seedTaskId' as seed, recorded_at,
                case when payload->>'selectionEventId' ~* '^[0-9a-f-]{36}$'
                     then (payload->>'selectionEventId')::uuid end as selection
           from events where payload->>'campaignId' = $1 and type = 'SynthesisStarted'
       ), outcomes as (
         select distinct on (payload->>'synthesisId') payload->>'synthesisId' as id, type,
                payload->>'reasonCode' as reason, recorded_at
           from events
          where payload->>'campaignId' = $1 and type in ('CandidateValidated', 'CandidateRejected')
          order by payload->>'synthesisId', transaction_id, position
       )
       select s.id as synthesis_id, s.seed, sel.payload->>'step' as step, o.type, o.reason,
              (extract(epoch from (o.recorded_at - s.recorded_at)) * 1000)::float8 as ms
         from started s join outcomes o on o.id = s.id
         left join events sel on sel.event_id = s.selection
        order by o.recorded_at`,
      [campaignId],
    ),
    synthesisFunnel(db, campaignId),
  ]);
  const band = (s: Record<string, unknown> | null, b: string) =>
    (s?.[b] ?? {}) as { tasks?: number; meanVariance?: number | null };
  const generated = composition.rows.filter((r) => r.origin === 'generated');
  return {
    campaignId,
    steps: steps.rows.map((r) => ({
      step: Number(r.step),
      closedAt: r.closed_at?.toISOString() ?? null,
      hard: band(r.summary, 'hard').tasks ?? 0,
      boundary: band(r.summary, 'boundary').tasks ?? 0,
      mastered: band(r.summary, 'mastered').tasks ?? 0,
      varHard: num(band(r.summary, 'hard').meanVariance),
      varBoundary: num(band(r.summary, 'boundary').meanVariance),
      varMastered: num(band(r.summary, 'mastered').meanVariance),
      boundaryVarianceRatio: num(r.summary?.boundaryVarianceRatio),
    })),
    pool: plans.rows.map((r) => {
      const active = num(r.result.activeSize) ?? 0;
      const gen = num(r.result.generated) ?? 0;
      return {
        step: Number(r.step),
        version: num(r.result.poolVersion) ?? 0,
        active,
        seeds: active - gen,
        generated: gen,
      };
    }),
    composition: composition.rows,
    funnel: {
      ...funnel,
      retired: generated.reduce((a, r) => a + r.retired, 0),
      pruned: generated.reduce((a, r) => a + r.pruned, 0),
    },
    latency: latency.rows.map((r) => ({
      synthesisId: r.synthesis_id,
      seedTaskId: r.seed,
      step: r.step === null ? null : Number(r.step),
      outcome: r.type === 'CandidateValidated' ? 'validated' : 'rejected',
      reasonCode: r.reason,
      ms: Math.max(0, Math.round(r.ms)),
    })),
  };
}

export interface CampaignListItem {
  campaignId: string;
  name: string;
  status: string;
  createdAt: string;
  poolVersion: number;
  /** Last planned step. */
  step: number;
}

/** Registered campaigns, newest first; `only` limits them to these ids (a token's campaign scopes). */
export async function listCampaigns(
  db: pg.Pool,
  only: readonly string[] | null,
  limit = 200,
): Promise<CampaignListItem[]> {
  const { rows } = await db.query<{
    campaign_id: string;
    name: string;
    status: string;
    created_at: Date;
    version: string | null;
    step: string | null;
  }>(
    `select c.campaign_id, c.name, c.status, c.created_at, v.version,
            (select max(p.step) from campaign_plans p where p.campaign_id = c.campaign_id) as step
       from campaigns c left join pool_versions v using (campaign_id)
      where $1::text[] is null or c.campaign_id = any($1::text[])
      order by c.created_at desc limit $2`,
    [only, limit],
  );
  return rows.map((r) => ({
    campaignId: r.campaign_id,
    name: r.name,
    status: r.status,
    createdAt: r.created_at.toISOString(),
    poolVersion: Number(r.version ?? 0),
    step: Number(r.step ?? 0),
  }));
}

export interface TaskMatch {
  taskId: string;
  origin: string;
  category: string;
  depth: number;
  active: boolean;
}

/** Pool tasks of a campaign whose id contains `q`, generated and deepest first. */
export async function findTasks(
  db: pg.Pool,
  campaignId: string,
  q: string,
  limit = 50,
): Promise<TaskMatch[]> {
  const pattern = `%${q.replace(/[\\%_]/g, (c) => `\\${c}`)}%`;
  const { rows } = await db.query<TaskMatch>(
    `select task_id as "taskId", origin, category, depth, active from pool_members
      where campaign_id = $1 and task_id ilike $2
      order by (origin = 'generated') desc, depth desc, task_id limit $3`,
    [campaignId, pattern, limit],
  );
  return rows;
}

export interface RewardPoint {
  taskId: string;
  step: number;
  /** Mean and variance of the step's reward group, and the running mean after it. */
  groupMean: number;
  groupVariance: number;
  mean: number;
  band: string | null;
}

/** The reward history of these tasks: one point per TaskStatsUpdated the aggregator recorded. */
export async function rewardHistory(
  db: pg.Pool,
  campaignId: string,
  taskIds: readonly string[],
): Promise<RewardPoint[]> {
  if (taskIds.length === 0) return [];
  const { rows } = await db.query<{ task_id: string; stats: Record<string, unknown> }>(
    `select payload->>'taskId' as task_id, payload->'stats' as stats from events
      where payload->>'campaignId' = $1 and type = 'TaskStatsUpdated'
        and payload->>'taskId' = any($2::text[])
      order by transaction_id, position`,
    [campaignId, taskIds],
  );
  return rows.map((r) => ({
    taskId: r.task_id,
    step: num(r.stats.lastStep) ?? 0,
    groupMean: num(r.stats.latestGroupMean) ?? 0,
    groupVariance: num(r.stats.latestGroupVariance) ?? 0,
    mean: num(r.stats.mean) ?? 0,
    band: typeof r.stats.band === 'string' ? r.stats.band : null,
  }));
}
