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

/**
 * One task's part of a step's statistics record (StepStatsRecorded): its state after the last of
 * its groups of that step the batch applied, and its band before the first of them.
 */
export interface StepEntry {
  campaignId: string;
  taskId: string;
  step: number;
  state: TaskState;
  /** The band before this step's groups (null: they were the task's first observation). */
  bandBefore: Band | null;
  /** Groups of this step applied to the task in the batch. */
  groups: number;
}

/** Whether the task changed band at the entry's step. */
export const changedBand = (e: StepEntry): boolean => e.bandBefore !== e.state.band;

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
  /**
   * Per (campaign, step, task) the task's statistics after the step's groups, in the order the
   * batch first applied a group of that step to the task: the batch's statistics record.
   */
  steps: StepEntry[];
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
  const entries = new Map<string, StepEntry>();
  const touched = new Map<
    string,
    { campaignId: string; taskId: string; lastEventId: string; policyVersion: string; newEventIds: string[] }
  >();
  const out: Folded = {
    applied: 0,
    duplicates: 0,
    dead: [],
    refused: [],
    steps: [],
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
    const ek = `${g.step}\u0000${k}`;
    const e = entries.get(ek);
    if (e) {
      e.state = r.state;
      e.groups++;
    } else {
      const entry = {
        campaignId: g.campaignId,
        taskId: g.taskId,
        step: g.step,
        state: r.state,
        bandBefore: prev?.band ?? null,
        groups: 1,
      };
      entries.set(ek, entry);
      out.steps.push(entry);
    }
  }
  out.touched = [...touched].map(([k, t]) => ({
    ...t,
    state: states.get(k)!,
    recentEventIds: windows.of(k),
  }));
  return out;
}
