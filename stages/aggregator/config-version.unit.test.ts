// Config versions in the fold: each group is banded with the version in force for its step, so a
// straggler of an earlier step keeps the old thresholds and the Kafka replay folds the same way.
import { describe, expect, it } from 'vitest';
import { foldGroups as replayFold } from '../../analysis/replay/reward-stream.js';
import { parseCampaignConfig } from '../../domain/campaign-config.js';
import { DedupeWindows } from '../../domain/dedupe.js';
import { eventIds } from '../../domain/ids.js';
import { type CampaignRow, configAtStep } from '../../platform/store/campaigns.js';
import type { Group } from './decode.js';
import { changedBand, foldGroups } from './fold.js';

const v1 = parseCampaignConfig({ detector: { low: 0.2, high: 0.85 } });
const v2 = parseCampaignConfig({ detector: { low: 0.6, high: 0.9 } });
const row: CampaignRow = {
  campaignId: 'c1',
  name: 'c1',
  rawConfig: {},
  config: v2,
  status: 'running',
  configVersion: 2,
  configs: [
    { version: 1, fromStep: 0, config: v1 },
    { version: 2, fromStep: 3, config: v2 },
  ],
};

let offset = 0;
function group(taskId: string, step: number): Group {
  const o = String(offset++);
  return {
    offset: o,
    eventId: eventIds.traceRolloutGroup('c1', 1, step, Number(o)),
    campaignId: 'c1',
    taskId,
    step,
    rewards: new Array(16).fill(0.5),
    policyVersion: 'p',
    key: Buffer.from(taskId),
    value: Buffer.from(o),
  };
}

describe('config versions', () => {
  it('picks the newest version whose first step is at or before the step', () => {
    expect(configAtStep(row, 0).detector.low).toBe(0.2);
    expect(configAtStep(row, 2).detector.low).toBe(0.2);
    expect(configAtStep(row, 3).detector.low).toBe(0.6);
    expect(configAtStep(row, 99).detector.low).toBe(0.6);
    // Two changes before any new step: the later one wins.
    const twice = { ...row, configs: [...row.configs!, { version: 3, fromStep: 3, config: v1 }] };
    expect(configAtStep(twice, 3).detector.low).toBe(0.2);
    // A row loaded without its history: its newest config.
    expect(configAtStep({ ...row, configs: undefined }, 1).detector.low).toBe(0.6);
  });

  it('bands each group with the thresholds of its step, in the aggregator and in the Kafka replay alike', () => {
    const gs = [group('a', 2), group('b', 2), group('a', 3), group('b', 2)];
    const folded = foldGroups({ groups: gs, campaigns: new Map([['c1', row]]), stored: [] });
    // mean 0.5: boundary under v1 (step 2), hard under v2 (step 3); b's second step-2 group stays v1.
    expect(folded.steps.filter(changedBand).map((c) => [c.taskId, c.step, c.state.band])).toEqual([
      ['a', 2, 'boundary'],
      ['b', 2, 'boundary'],
      ['a', 3, 'hard'],
    ]);
    const states = new Map();
    replayFold(
      gs.map((g) => ({ eventId: g.eventId, taskId: g.taskId, step: g.step, rewards: g.rewards })),
      states,
      new DedupeWindows(),
      (step) => configAtStep(row, step),
    );
    for (const t of folded.touched) expect(states.get(t.taskId)?.band).toBe(t.state.band);
  });
});

describe('duplicates in the aggregator and in the Kafka replay', () => {
  it('skip the same repeats: one within the task window, none from before it', () => {
    // Window of 3: task a's first group comes again after 4 more of a's groups (counts again in
    // both), its fourth again right after it (skipped in both); b's groups never push a's out.
    const a = [1, 2, 3, 4, 5].map((s) => group('a', s));
    const b = group('b', 1);
    const stream = [
      ...a,
      b,
      { ...a[0]!, offset: String(offset++), step: 6 },
      { ...a[4]!, offset: String(offset++) },
    ];
    const live = foldGroups({
      groups: stream,
      campaigns: new Map([['c1', row]]),
      stored: [],
      dedupeWindow: 3,
    });
    expect({ applied: live.applied, duplicates: live.duplicates }).toEqual({ applied: 7, duplicates: 1 });

    const states = new Map();
    const counted = replayFold(
      stream.map((g) => ({ eventId: g.eventId, taskId: g.taskId, step: g.step, rewards: g.rewards })),
      states,
      new DedupeWindows(3),
      (step) => configAtStep(row, step),
    );
    expect(counted).toBe(live.applied);
    for (const t of live.touched) expect(states.get(t.taskId)?.groups).toBe(t.state.groups);
    expect(states.get('a')?.groups).toBe(6);
  });
});
