// Folding a batch's fresh groups into per-task statistics with the domain core (applyGroup), in
// offset order (per task, the order the trainer produced them), each with the campaign's config
// version for the group's step. Pure: the state it starts from
// is what the state store loaded, and what it returns is written back in the same transaction.
import type { Band } from '../../domain/band.js';
import { DedupeWindows } from '../../domain/dedupe.js';
import { applyGroup, type TaskState } from '../../domain/task-stats.js';
import { type CampaignRow, configAtStep } from '../../platform/store/campaigns.js';
import { type StoredTask, type TaskUpdate, taskKey } from '../../platform/store/task-stats/state.js';
import type { DeadLetterNote, Group } from './decode.js';
import { StepTallies } from './step-progress.js';
import { groupProblem, unknownCampaign } from './validate.js';

export interface BandChange {
  campaignId: string;
  taskId: string;
  /** The group that moved the task to another band. */
  sourceEventId: string;
  from: Band | null;
  to: Band;
  step: number;
  /** The task's statistics right after that group. */
  state: TaskState;
}

/** A group refused for its content (reward limits, an unknown task): counted as rejected for its step once. */
export interface Refused {
  campaignId: string;
  eventId: string;
  step: number;
  code: string;
}

export interface Folded {
  applied: number;
  duplicates: number;
  /** Groups refused (unknown campaign, reward limits, unknown task), to dead-letter. */
  dead: DeadLetterNote[];
  /**
   * The groups of a registered campaign among them: the batch tallies each as rejected for its
   * step unless it was refused before (a re-sent batch; aggregator_rejections), which could
   * otherwise close the step before the groups still owed to it arrived.
   */
  refused: Refused[];
  /** Every band change, in the order the groups were applied. */
  bandChanges: BandChange[];
  /** The tasks groups were applied to, with their final statistics, in the order first touched. */
  touched: TaskUpdate[];
  tallies: StepTallies;
}

export function foldGroups(input: {
  /** The batch's groups not applied before, in offset order. */
  groups: readonly Group[];
  campaigns: ReadonlyMap<string, CampaignRow | undefined>;
  stored: readonly StoredTask[];
  dedupeWindow?: number;
  /**
   * Tasks without statistics yet that were ever in their campaign's pool (taskKey), for campaigns
   * that dead-letter unknown tasks (ingestion.unknownTasks; under `refuse` the gateway refuses
   * them); a task neither here nor stored is unknown.
   */
  members?: ReadonlySet<string>;
}): Folded {
  const states = new Map<string, TaskState>();
  const windows = new DedupeWindows(input.dedupeWindow);
  for (const s of input.stored) {
    states.set(taskKey(s.campaignId, s.taskId), s.state);
    windows.load(taskKey(s.campaignId, s.taskId), s.recentEventIds);
  }
  const touched = new Map<
    string,
    { campaignId: string; taskId: string; lastEventId: string; policyVersion: string; newEventIds: string[] }
  >();
  const out: Folded = {
    applied: 0,
    duplicates: 0,
    dead: [],
    refused: [],
    bandChanges: [],
    touched: [],
    tallies: new StepTallies(),
  };
  for (const g of input.groups) {
    const k = taskKey(g.campaignId, g.taskId);
    if (windows.seen(k, g.eventId)) {
      out.duplicates++;
      continue;
    }
    const campaign = input.campaigns.get(g.campaignId);
    if (!campaign) {
      out.dead.push({ offset: g.offset, ...unknownCampaign(g.campaignId), key: g.key, value: g.value });
      continue;
    }
    const prev = states.get(k);
    // The version in force for the group's step (platform/store/campaigns.ts configAtStep), as replay does.
    const config = configAtStep(campaign, g.step);
    const problem =
      !prev && config.ingestion.unknownTasks === 'dead-letter' && input.members && !input.members.has(k)
        ? {
            code: 'unknown-task',
            reason: `${g.taskId} step ${g.step}: task ${JSON.stringify(g.taskId)} was never in the pool of campaign ${g.campaignId} (ingestion.unknownTasks = ${config.ingestion.unknownTasks})`,
          }
        : groupProblem(g, prev?.lastStep, config);
    if (problem) {
      out.dead.push({ offset: g.offset, ...problem, key: g.key, value: g.value });
      out.refused.push({ campaignId: g.campaignId, eventId: g.eventId, step: g.step, code: problem.code });
      continue;
    }
    windows.remember(k, g.eventId);
    const r = applyGroup(prev, g.rewards, g.step, config.detector, config.rewards.lateGroups);
    states.set(k, r.state);
    out.applied++;
    const t = touched.get(k);
    if (t) {
      t.lastEventId = g.eventId;
      t.policyVersion = g.policyVersion;
      t.newEventIds.push(g.eventId);
    } else {
      touched.set(k, {
        campaignId: g.campaignId,
        taskId: g.taskId,
        lastEventId: g.eventId,
        policyVersion: g.policyVersion,
        newEventIds: [g.eventId],
      });
    }
    out.tallies.applied(g.campaignId, g.step, r.state.band, r.group.variance);
    if (r.bandChange) {
      out.bandChanges.push({
        campaignId: g.campaignId,
        taskId: g.taskId,
        sourceEventId: g.eventId,
        from: r.bandChange.from,
        to: r.bandChange.to,
        step: g.step,
        state: r.state,
      });
    }
  }
  out.touched = [...touched].map(([k, t]) => ({
    ...t,
    state: states.get(k)!,
    recentEventIds: windows.of(k),
  }));
  return out;
}
