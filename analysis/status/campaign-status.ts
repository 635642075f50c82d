// A campaign's status and what holds it (analysis/status/README.md): the workflow's own view when a
// worker answers, else PostgreSQL's projections, plus the oldest open step and what it waits
// for, unpublished batches, overdue syntheses, relay lag, aggregator lag and dead letters. Every
// remote part is bounded by a deadline and reported in `errors` when it fails: this never hangs
// on a missing worker, and answers with the projections alone when Temporal or Kafka is away.
import type { Client } from '@temporalio/client';
import type pg from 'pg';
import type { CampaignConfig } from '../../domain/campaign-config.js';
import { type KafkaClient, openKafka } from '../../platform/kafka/client.js';
import { REWARDS_TOPIC } from '../../platform/kafka/topology.js';
import { parkedOf } from '../../platform/store/aggregator/park.js';
import { stuckHeads } from '../../platform/store/aggregator/suspects.js';
import { lastPlannedStep } from '../../platform/store/campaign-plans.js';
import { loadCampaign } from '../../platform/store/campaigns.js';
import { checkpointWaits } from '../../platform/store/checkpoints/waits.js';
import { poolView } from '../../platform/store/pool/view.js';
import { unpublishedBatches } from '../../platform/store/steps/batches.js';
import { describeMissingStep, missingStep } from '../../platform/store/steps/missing-step.js';
import { stepProgress } from '../../platform/store/steps/view.js';
import { aggregatorLag, deadLettersSince, relayLag } from './kafka.js';
import type { StatusKafka } from './kafka-shared.js';
import { unfinishedSyntheses, waitingFor } from './projections.js';
import {
  type CampaignStatusReport,
  type Holds,
  type MissingStepView,
  STATUS_FORMAT,
  type WorkerView,
} from './report.js';
import { bounded, workflowView } from './temporal.js';

export type { CampaignStatusReport } from './report.js';

/** A synthesis without an outcome after this long is reported overdue (override per call). */
export const DEFAULT_SYNTHESIS_TIMEOUT_MS = 30 * 60_000;

export interface StatusDeps {
  db: pg.Pool;
  /** null: Temporal is not reachable (the report says so). */
  temporal: Client | null;
  /** Opened (and closed) per call when absent (a one-shot command). */
  kafka?: KafkaClient;
  /**
   * A long-lived process's Kafka part (the gateway): one admin and one dead-letter tail for all
   * its calls, instead of a client, an admin and a consumer group per call.
   */
  statusKafka?: StatusKafka;
}

export interface StatusOptions {
  /** Relay whose checkpoint measures the relay lag (`rods relay --name`); default main. */
  relayName?: string;
  /** The aggregators' consumer group; default rods-aggregator. */
  aggregatorGroup?: string;
  rewardsTopic?: string;
  synthesisTimeoutMs?: number;
  /** Bound of each Temporal call; default 3 s. */
  temporalTimeoutMs?: number;
  /** Bound of the status query once a worker is seen; default 3 s. */
  queryTimeoutMs?: number;
  /** Bound of the Kafka part (lags and dead letters); default 10 s. */
  kafkaTimeoutMs?: number;
  /** Read what holds the campaign (PostgreSQL and Kafka); false: only the workflow, worker and pool. */
  holds?: boolean;
  /** Read the dead-letter topic (the slowest part); default true. */
  deadLetters?: boolean;
  now?: () => number;
}

/** The report, or undefined when the campaign is not registered. */
export async function campaignStatus(
  deps: StatusDeps,
  campaignId: string,
  opts: StatusOptions = {},
): Promise<CampaignStatusReport | undefined> {
  const { db } = deps;
  const now = (opts.now ?? Date.now)();
  const campaign = await loadCampaign(db, campaignId);
  if (!campaign) return undefined;
  const errors: Record<string, string> = {};

  const wf = deps.temporal
    ? workflowView(deps.temporal, campaignId, {
        timeoutMs: opts.temporalTimeoutMs ?? 3000,
        queryTimeoutMs: opts.queryTimeoutMs ?? 3000,
        now,
      })
    : Promise.resolve(null);
  const holdsP = opts.holds === false ? Promise.resolve(null) : readHolds(deps, campaignId, opts, now);
  const [pool, view, held] = await Promise.all([poolView(db, campaignId), wf, holdsP]);

  Object.assign(errors, view?.errors ?? {});
  const worker: WorkerView = view?.worker ?? {
    present: false,
    taskQueue: null,
    pollers: [],
    answered: false,
    detail: 'Temporal is not reachable',
  };
  if (!view) errors.temporal = 'Temporal is not reachable';
  const workflow = view?.workflow ?? null;
  let holds: Holds | null = null;
  if (held) {
    Object.assign(errors, held.errors);
    holds = held.holds;
    // The workflow's own view, when it answered, is the authority on what it planned and runs.
    holds.lastPlannedStep = Math.max(holds.lastPlannedStep, workflow?.step ?? 0);
    holds.closedNotPlanned = Math.max(0, holds.lastClosedStep - holds.lastPlannedStep);
    holds.missingStep = await missingStepView(db, campaignId, holds.lastPlannedStep + 1, campaign.config);
    if (workflow && view?.source === 'workflow')
      holds.runningSyntheses = Object.keys(workflow.running).length;
  }

  const exec = view?.execution ?? null;
  let status: string;
  let source: CampaignStatusReport['source'];
  if (view?.source === 'workflow' && workflow) {
    status = workflow.status;
    source = 'workflow';
  } else if (view?.source === 'workflow-result') {
    status = 'completed';
    source = 'workflow-result';
  } else {
    source = 'projections';
    if (exec && exec.status !== 'RUNNING') status = exec.status.toLowerCase().replace(/_/g, '-');
    else if (view && !exec && !errors.temporal) status = 'no-workflow';
    else status = campaign.status;
  }
  return {
    format: STATUS_FORMAT,
    campaignId,
    name: campaign.name,
    checkedAt: new Date(now).toISOString(),
    status,
    source,
    step: workflow?.step ?? (await lastPlannedStep(db, campaignId)),
    poolVersion: workflow?.poolVersion ?? pool.poolVersion,
    worker,
    execution: exec,
    workflow,
    pool,
    holds,
    errors,
  };
}

/** What holds the campaign, from PostgreSQL and Kafka. */
async function readHolds(
  deps: StatusDeps,
  campaignId: string,
  opts: StatusOptions,
  now: number,
): Promise<{ holds: Holds; errors: Record<string, string> }> {
  const { db } = deps;
  const kafkaPart = kafkaView(deps, campaignId, opts);
  const [steps, unpublished, unfinished, stuck, parked, waits] = await Promise.all([
    stepProgress(db, campaignId),
    unpublishedBatches(db, campaignId),
    unfinishedSyntheses(db, campaignId),
    stuckHeads(db, opts.aggregatorGroup ?? 'rods-aggregator'),
    parkedOf(db, campaignId),
    checkpointWaits(db, campaignId),
  ]);
  const synthesisTimeoutMs = opts.synthesisTimeoutMs ?? DEFAULT_SYNTHESIS_TIMEOUT_MS;
  for (const s of unfinished)
    s.runningS = Math.max(0, Math.round((now - Date.parse(s.startedAt ?? s.selectedAt)) / 1000));
  const o = steps.oldest;
  const holds: Holds = {
    lastClosedStep: steps.lastClosedStep,
    lastClosedAt: steps.lastClosedAt,
    lastPlannedStep: steps.lastPlannedStep,
    oldestOpenStep: o
      ? {
          step: o.step,
          declaredGroups: o.declaredGroups,
          countedGroups: o.appliedGroups + o.rejectedGroups,
          appliedGroups: o.appliedGroups,
          rejectedGroups: o.rejectedGroups,
          missingGroups:
            o.declaredGroups === null
              ? null
              : Math.max(0, o.declaredGroups - o.appliedGroups - o.rejectedGroups),
          batches: {
            accepted: steps.batches.filter((b) => b.status === 'accepted').length,
            published: steps.batches.filter((b) => b.status !== 'accepted').length,
            closingReceived: steps.batches.some((b) => b.closes),
          },
          unpublishedBatches: steps.batches
            .filter((b) => b.status === 'accepted')
            .map(({ batchId, groups, closes, acceptedAt }) => ({ batchId, groups, closes, acceptedAt })),
          waitingFor: waitingFor(o, steps.batches),
        }
      : null,
    closedNotPlanned: Math.max(0, steps.lastClosedStep - steps.lastPlannedStep),
    missingStep: null,
    checkpointsWaiting: waits,
    stuckPartitions: stuck,
    parked: parked.records > 0 ? parked : null,
    unpublishedBatches: {
      count: unpublished.count,
      groups: unpublished.groups,
      oldestAcceptedAt: unpublished.oldestAcceptedAt,
    },
    runningSyntheses: unfinished.length,
    synthesisTimeoutS: Math.round(synthesisTimeoutMs / 1000),
    overdueSyntheses: unfinished.filter((s) => s.runningS * 1000 > synthesisTimeoutMs),
    relay: null,
    aggregator: null,
    deadLetters: null,
  };
  const k = await kafkaPart(steps.lastClosedAt === null ? null : Date.parse(steps.lastClosedAt));
  holds.relay = k.relay;
  holds.aggregator = k.aggregator;
  holds.deadLetters = k.deadLetters;
  return { holds, errors: k.errors };
}

async function missingStepView(
  db: pg.Pool,
  campaignId: string,
  step: number,
  config: CampaignConfig,
): Promise<MissingStepView | null> {
  const m = await missingStep(db, campaignId, step);
  if (!m) return null;
  const { policy, afterSteps } = config.ingestion.missingSteps;
  const { campaignId: _c, ...rest } = m;
  return { ...rest, policy, afterSteps, detail: describeMissingStep(m) };
}

/** Starts the Kafka part at once; the returned function waits for it (given the dead letters' start). */
function kafkaView(deps: StatusDeps, campaignId: string, opts: StatusOptions) {
  const timeoutMs = opts.kafkaTimeoutMs ?? 10_000;
  const shared = deps.statusKafka;
  const kafka =
    shared?.kafka ?? deps.kafka ?? openKafka({ clientId: 'rods-status', retries: 1, quiet: true });
  const errors: Record<string, string> = {};
  const admin = bounded('connecting to Kafka', timeoutMs, () => shared?.connectedAdmin() ?? kafka.admin());
  admin.catch(() => {});
  return async (sinceMs: number | null) => {
    let a: Awaited<typeof admin>;
    try {
      a = await admin;
    } catch (e) {
      const m = (e as Error).message;
      return { relay: null, aggregator: null, deadLetters: null, errors: { kafka: m } };
    }
    try {
      const part = async <T>(name: string, fn: () => Promise<T>): Promise<T | null> => {
        try {
          return await bounded(name, timeoutMs, fn);
        } catch (e) {
          errors[name] = (e as Error).message;
          return null;
        }
      };
      const [relay, aggregator, deadLetters] = await Promise.all([
        part('relay', () => relayLag(a, deps.db, campaignId, opts.relayName ?? 'main')),
        part('aggregator', () =>
          aggregatorLag(
            a,
            deps.db,
            opts.aggregatorGroup ?? 'rods-aggregator',
            opts.rewardsTopic ?? REWARDS_TOPIC,
          ),
        ),
        opts.deadLetters === false
          ? Promise.resolve(null)
          : part('deadLetters', () =>
              shared
                ? shared.deadLetters(campaignId, sinceMs, { timeoutMs: timeoutMs - 500 })
                : deadLettersSince(kafka, a, campaignId, sinceMs, { timeoutMs: timeoutMs - 500 }),
            ),
      ]);
      // A call that failed on the shared connection leaves the next one a new admin.
      if (shared && (errors.relay || errors.aggregator)) await shared.reset();
      return { relay, aggregator, deadLetters, errors };
    } finally {
      if (!shared) await a.disconnect().catch(() => {});
    }
  };
}
