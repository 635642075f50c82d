// `rods replay --source kafka`: recompute a campaign's task statistics from the reward topic
// itself (kept forever for this) with the same pure domain code as the aggregator, each group
// with the config version in force for its step, and compare them (bands too) with the live ones.

import type pg from 'pg';
import { DEFAULT_DEDUPE_WINDOW, DedupeWindows } from '../../domain/dedupe.js';
import type { TaskState } from '../../domain/task-stats.js';
import { configAtStep, loadCampaign } from '../../platform/store/campaigns.js';
import { everPoolMembers } from '../../platform/store/pool/members.js';
import { statsMoments } from '../../platform/store/task-stats/view.js';
import { foldCampaignGroups, processingFailed } from './reward-stream.js';

export interface KafkaStatsCheck {
  equal: boolean;
  tasks: number;
  groups: number;
  firstDifference?: Record<string, unknown>;
}

export async function kafkaStatsCheck(
  pool: pg.Pool,
  campaignId: string,
  topic: string,
  /** The live aggregators' --dedupe-window. */
  dedupeWindow = DEFAULT_DEDUPE_WINDOW,
): Promise<KafkaStatsCheck> {
  const campaign = await loadCampaign(pool, campaignId, { history: true });
  if (!campaign) throw new Error(`unknown campaign ${campaignId}`);
  const states = new Map<string, TaskState>();
  // Records the aggregator gave up on (processing-failed dead letters) never counted live.
  const failed = await processingFailed(topic);
  // Tasks ever in the pool: where the campaign dead-letters unknown tasks, only their groups count.
  const members = new Set(await everPoolMembers(pool, campaignId));
  // Each group with the config version in force for its step, as the aggregator folded it.
  const groups = await foldCampaignGroups(
    topic,
    campaignId,
    states,
    new DedupeWindows(dedupeWindow),
    (step) => configAtStep(campaign, step),
    failed,
    (taskId, step) =>
      configAtStep(campaign, step).ingestion.unknownTasks !== 'dead-letter' || members.has(taskId),
  );
  const live = await statsMoments(pool, campaignId);
  const rel = (a: number, b: number) => (a === b ? 0 : Math.abs(a - b) / Math.max(Math.abs(a), Math.abs(b)));
  let firstDifference: Record<string, unknown> | undefined;
  for (const r of live) {
    const s = states.get(r.task_id);
    const varLive = r.rollouts ? r.m2 / r.rollouts : 0;
    const varKafka = s?.moments.n ? s.moments.m2 / s.moments.n : 0;
    if (
      !s ||
      s.groups !== r.groups ||
      s.moments.n !== r.rollouts ||
      rel(s.moments.mean, r.mean) > 1e-12 ||
      rel(varKafka, varLive) > 1e-12 ||
      s.band !== r.band
    ) {
      firstDifference = {
        taskId: r.task_id,
        live: { groups: r.groups, mean: r.mean, band: r.band },
        kafka: s ? { groups: s.groups, mean: s.moments.mean, band: s.band } : null,
      };
      break;
    }
  }
  if (!firstDifference && states.size !== live.length) {
    firstDifference = { tasks: { live: live.length, kafka: states.size } };
  }
  return {
    equal: !firstDifference,
    tasks: states.size,
    groups,
    ...(firstDifference ? { firstDifference } : {}),
  };
}
