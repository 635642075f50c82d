// The curriculum step: seeding a campaign's pool and planning each training step with the pure
// pool policy (domain/pool.ts). The pool state is kept beside the events in PostgreSQL
// (campaign_plans): one transaction loads it, decides, appends the decisions as events, updates
// the projections and stores the new state with the plan. A retried activity finds its plan
// recorded and returns it instead of deciding again, so every decision happens once.
import { Context } from '@temporalio/activity';
import type pg from 'pg';
import { loadTaskStats } from '../aggregator/stats-query.js';
import { type CampaignConfig, isInjectionBoundary, parseCampaignConfig } from '../domain/campaign-config.js';
import { candidateHash } from '../domain/candidate.js';
import {
  applyDecisions,
  EMPTY_POOL,
  type PoolDecision,
  type PoolState,
  planDecisions,
  planInjection,
  queueCandidate,
  retire,
  seedTasks,
  selectSeeds,
  type TaskStats,
} from '../domain/pool.js';
import { inTransaction } from '../store/db.js';
import type { NewEvent } from '../store/event-store.js';
import { recordEventsIn } from '../store/pool-projection.js';
import { derivedUuid } from '../util/ids.js';
import { campaignStream } from './campaign.js';
import { workerEvent } from './events.js';
import type { ExecutorClient, SeedCategory, TaskRecord } from './executor-client.js';
import { SEED_CATEGORIES } from './executor-client.js';

export interface CurriculumDeps {
  pool: pg.Pool;
  executor: ExecutorClient;
  now?: () => number;
}

export interface SelectedSeed {
  taskId: string;
  category: string;
  phi: number;
  quotaSlot: number;
  stats: TaskStats;
  rootSeedId: string;
  depth: number;
  selectionEventId: string;
  /** Policy version of the latest reward group of the seed (lineage). */
  policyVersion: string | null;
  task: TaskRecord;
}

export interface StepPlan {
  step: number;
  poolVersion: number;
  versionChanged: boolean;
  boundary: boolean;
  retired: { taskId: string; rule: string }[];
  selected: SelectedSeed[];
  injected: string[];
  pruned: string[];
  queueLength: number;
  activeSize: number;
  generated: number;
  /** What the decisions depended on besides the statistics (for what-if re-runs). */
  inputs: { inFlight: string[]; runningSyntheses: number; enqueued: string[] };
}

interface CandidateRow {
  candidate_id: string;
  candidate_hash: string;
  seed_task_id: string;
  candidate: Record<string, unknown>;
  lineage: { parentPhi?: number; parents?: string[]; category?: string };
}

const event = workerEvent;

async function lock(c: pg.PoolClient, campaignId: string): Promise<void> {
  await c.query('select pg_advisory_xact_lock(hashtextextended($1, 0))', [`rods-plan:${campaignId}`]);
}

async function recordedPlan<T>(c: pg.PoolClient, campaignId: string, step: number): Promise<T | undefined> {
  const r = await c.query<{ result: T }>(
    'select result from campaign_plans where campaign_id = $1 and step = $2',
    [campaignId, step],
  );
  return r.rows[0]?.result;
}

async function latestState(
  c: pg.PoolClient,
  campaignId: string,
): Promise<{ step: number; state: PoolState } | undefined> {
  const r = await c.query<{ step: number; state: PoolState }>(
    'select step, state from campaign_plans where campaign_id = $1 order by step desc limit 1',
    [campaignId],
  );
  return r.rows[0];
}

export function createCurriculumActivities(deps: CurriculumDeps) {
  const now = deps.now ?? Date.now;
  return {
    /**
     * Seeds the pool with the BFCL multi-turn tasks shipped in bfcl-eval (TaskSeeded each),
     * `perCategory` per category. Idempotent: a campaign seeded before returns its recorded seeding.
     */
    async seedCampaign(input: {
      campaignId: string;
      perCategory: number;
      categories?: string[];
    }): Promise<{ seeded: number; poolVersion: number }> {
      const done = await deps.pool.query<{ result: { seeded: number; poolVersion: number } }>(
        'select result from campaign_plans where campaign_id = $1 and step = 0',
        [input.campaignId],
      );
      if (done.rows[0]) return done.rows[0].result;
      const categories = (input.categories ?? [...SEED_CATEGORIES]) as SeedCategory[];
      const seeds: TaskRecord[] = [];
      for (const cat of categories) {
        Context.current().heartbeat(cat);
        seeds.push(...(await deps.executor.seeds(cat, input.perCategory)));
      }
      return inTransaction(deps.pool, async (c) => {
        await lock(c, input.campaignId);
        const again = await recordedPlan<{ seeded: number; poolVersion: number }>(c, input.campaignId, 0);
        if (again) return again;
        const decisions = seedTasks(
          EMPTY_POOL,
          seeds.map((s) => ({ taskId: s.id, category: s.category })),
          0,
        );
        const state = applyDecisions(EMPTY_POOL, decisions);
        const byId = new Map(seeds.map((s) => [s.id, s]));
        const events = decisions.map((d) => {
          const task = byId.get(d.taskId)!;
          return event('TaskSeeded', derivedUuid('TaskSeeded', input.campaignId, d.taskId), {
            campaignId: input.campaignId,
            taskId: d.taskId,
            category: d.category,
            task: JSON.stringify(task),
            taskHash: candidateHash(task),
            source: `bfcl-eval ${task.category} ${task.id}`,
            poolVersion: d.poolVersion,
            occurredAt: now(),
          });
        });
        await recordEventsIn(c, campaignStream(input.campaignId), events);
        const result = { seeded: decisions.length, poolVersion: state.version };
        await c.query(
          'insert into campaign_plans (campaign_id, step, state, result) values ($1, 0, $2, $3)',
          [input.campaignId, JSON.stringify(state), JSON.stringify(result)],
        );
        return result;
      });
    },

    /**
     * Plans training step `step` once it is aggregated: folds the latest statistics into the pool,
     * retires by rule, queues validated candidates, selects boundary seeds and, at an injection
     * boundary, injects and prunes. Appends TaskRetired, SeedSelected, TaskInjected, PoolPruned
     * and (for a discarded duplicate) CandidateRejected.
     */
    async planStep(input: {
      campaignId: string;
      step: number;
      config: unknown;
      inFlight: string[];
      runningSyntheses: number;
    }): Promise<StepPlan> {
      const cfg: CampaignConfig = parseCampaignConfig(input.config);
      const { campaignId, step } = input;
      return inTransaction(deps.pool, async (c) => {
        await lock(c, campaignId);
        const again = await recordedPlan<StepPlan>(c, campaignId, step);
        if (again) return again;
        const prev = await latestState(c, campaignId);
        if (!prev) throw new Error(`campaign ${campaignId} has no seeded pool; seed it first`);
        if (prev.step >= step)
          throw new Error(
            `campaign ${campaignId}: step ${step} is not after the last planned step ${prev.step}`,
          );
        let state = prev.state;
        const stats = await loadTaskStats(c, campaignId);

        // Fold the statistics seen since the last plan into the members (not membership changes).
        const observed: PoolDecision[] = [];
        for (const m of state.members) {
          const s = stats[m.taskId];
          if (s && (!m.lastStats || m.lastStats.groupCount !== s.groupCount))
            observed.push({ kind: 'observe', taskId: m.taskId, stats: s });
        }
        state = applyDecisions(state, observed);

        // Validated candidates not yet queued or in the pool join the queue.
        const cands = await c.query<CandidateRow>(
          `select candidate_id, candidate_hash, seed_task_id, candidate, lineage from candidates
            where campaign_id = $1 and status = 'validated' order by created_at, candidate_id`,
          [campaignId],
        );
        const known = new Set([
          ...state.queue.map((q) => q.candidateId),
          ...state.members.flatMap((m) => (m.candidateId ? [m.candidateId] : [])),
        ]);
        const lineageOf = (id: string) => {
          const m = state.members.find((x) => x.taskId === id);
          return m ? { rootSeedId: m.rootSeedId, depth: m.depth } : undefined;
        };
        const enqueue: PoolDecision[] = [];
        const candidateRows = new Map(cands.rows.map((r) => [r.candidate_id, r]));
        for (const r of cands.rows) {
          if (known.has(r.candidate_id)) continue;
          const parents = r.lineage.parents?.length ? r.lineage.parents : [r.seed_task_id];
          const rootKnown =
            lineageOf(parents[0]!) ?? (r.lineage as { rootSeedId?: string; depth?: number }).rootSeedId;
          try {
            enqueue.push(
              queueCandidate(
                state,
                {
                  candidateId: r.candidate_id,
                  taskId: String((r.candidate as { id?: string }).id ?? r.candidate_id),
                  category: String(
                    (r.candidate as { category?: string }).category ?? r.lineage.category ?? 'base',
                  ),
                  parents,
                  parentPhi: r.lineage.parentPhi ?? 0,
                },
                step,
                (id) =>
                  lineageOf(id) ??
                  (id === parents[0] && typeof rootKnown === 'string'
                    ? { rootSeedId: rootKnown, depth: (r.lineage as { depth?: number }).depth ?? 0 }
                    : undefined),
              ),
            );
          } catch {
            // A candidate whose lineage cannot be resolved stays validated but is not queued.
          }
        }
        state = applyDecisions(state, enqueue);

        const retired = retire(state, stats, step, cfg);
        state = applyDecisions(state, retired);
        const selected = selectSeeds(state, stats, step, cfg, {
          inFlight: input.inFlight,
          runningSyntheses: input.runningSyntheses,
        });
        state = applyDecisions(state, selected);
        const phiByTask: Record<string, number> = {};
        for (const [id, s] of Object.entries(stats)) phiByTask[id] = s.phi;
        const injection = planInjection(state, step, cfg, phiByTask);
        const before = state.version;
        state = applyDecisions(state, planDecisions(injection));

        // The decisions as events.
        const ev: NewEvent[] = [];
        for (const d of retired) {
          ev.push(
            event('TaskRetired', derivedUuid('TaskRetired', campaignId, d.taskId, step), {
              campaignId,
              taskId: d.taskId,
              rule: d.rule,
              stats: d.stats,
              poolVersion: d.poolVersion,
              step,
              occurredAt: now(),
            }),
          );
        }
        const selectedOut: SelectedSeed[] = [];
        for (const d of selected) {
          const eventId = derivedUuid('SeedSelected', campaignId, d.taskId, step);
          ev.push(
            event('SeedSelected', eventId, {
              campaignId,
              seedTaskId: d.taskId,
              category: d.category,
              step,
              phi: d.phi,
              quotaSlot: d.quotaSlot,
              stats: d.stats,
              occurredAt: now(),
            }),
          );
          const t = await c.query<{ task: TaskRecord; policy_version: string | null }>(
            `select m.task, s.last_policy_version as policy_version from pool_members m
               left join task_stats s on s.campaign_id = m.campaign_id and s.task_id = m.task_id
              where m.campaign_id = $1 and m.task_id = $2`,
            [campaignId, d.taskId],
          );
          const task = t.rows[0]?.task;
          if (task) {
            selectedOut.push({
              taskId: d.taskId,
              category: d.category,
              phi: d.phi,
              quotaSlot: d.quotaSlot,
              stats: d.stats,
              rootSeedId: d.rootSeedId,
              depth: d.depth,
              selectionEventId: eventId,
              policyVersion: t.rows[0]?.policy_version ?? null,
              task: typeof task === 'string' ? (JSON.parse(task) as TaskRecord) : task,
            });
          }
        }
        for (const d of injection.discard) {
          const row = candidateRows.get(d.candidateId);
          ev.push(
            event(
              'CandidateRejected',
              derivedUuid('CandidateRejected', campaignId, d.candidateId, 'discard'),
              {
                campaignId,
                synthesisId: String(
                  (row?.lineage as { synthesisId?: string } | undefined)?.synthesisId ?? 'unknown',
                ),
                candidateId: d.candidateId,
                seedTaskId: row?.seed_task_id ?? 'unknown',
                stage: 'critique',
                reasonCode: d.reason,
                reason: `task id ${d.taskId} is already in the pool or the queue`,
                occurredAt: now(),
              },
            ),
          );
        }
        for (const d of injection.inject) {
          const row = candidateRows.get(d.candidateId);
          const task = row?.candidate ?? {};
          ev.push(
            event(
              'TaskInjected',
              derivedUuid('TaskInjected', campaignId, d.taskId),
              {
                campaignId,
                taskId: d.taskId,
                candidateId: d.candidateId,
                category: d.category,
                task: JSON.stringify(task),
                taskHash: row?.candidate_hash ?? candidateHash(task),
                parents: d.parents,
                poolVersion: d.poolVersion,
                step,
                occurredAt: now(),
              },
              { rootSeed: d.rootSeedId },
            ),
          );
        }
        if (injection.prune.length > 0) {
          ev.push(
            event('PoolPruned', derivedUuid('PoolPruned', campaignId, step), {
              campaignId,
              cap: injection.generatedCap,
              generatedBefore: injection.generatedBefore,
              pruned: injection.prune.map((p) => ({ taskId: p.taskId, phi: p.phi })),
              poolVersion: injection.prune[0]!.poolVersion,
              step,
              occurredAt: now(),
            }),
          );
        }
        if (ev.length > 0) await recordEventsIn(c, campaignStream(campaignId), ev);
        const plan: StepPlan = {
          step,
          poolVersion: state.version,
          versionChanged: state.version !== prev.state.version,
          boundary: isInjectionBoundary(step, cfg),
          retired: retired.map((d) => ({ taskId: d.taskId, rule: d.rule })),
          selected: selectedOut,
          injected: injection.inject.map((d) => d.taskId),
          pruned: injection.prune.map((d) => d.taskId),
          queueLength: state.queue.length,
          activeSize: state.members.length,
          generated: state.members.filter((m) => m.origin === 'generated').length,
          inputs: {
            inFlight: input.inFlight,
            runningSyntheses: input.runningSyntheses,
            enqueued: enqueue.flatMap((d) => (d.kind === 'enqueue' ? [d.candidate.candidateId] : [])),
          },
        };
        void before;
        await c.query(
          'insert into campaign_plans (campaign_id, step, state, result) values ($1, $2, $3, $4)',
          [campaignId, step, JSON.stringify(state), JSON.stringify(plan)],
        );
        return plan;
      });
    },
  };
}

export type CurriculumActivities = ReturnType<typeof createCurriculumActivities>;
