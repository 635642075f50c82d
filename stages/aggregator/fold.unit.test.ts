// The batch pipeline's pure seams: decoding (bad bytes and bad ids become dead-letter notes),
// folding (dedupe window, reward limits, unknown campaigns, band changes, step tallies) and the
// per-step statistics records derived from a fold (one per campaign and step, ids from what they record).
import { describe, expect, it } from 'vitest';
import { parseCampaignConfig } from '../../domain/campaign-config.js';
import { eventIds } from '../../domain/ids.js';
import { applyGroup, stepStatsEntries } from '../../domain/task-stats.js';
import { defaultRegistry, encode } from '../../platform/codec/registry.js';
import type { CampaignRow } from '../../platform/store/campaigns.js';
import type { EventPayloads } from '../../schemas/types.generated.js';
import { decodeBatch, type Group } from './decode.js';
import { MAX_TASKS_PER_RECORD, statsEvents } from './events.js';
import { foldGroups } from './fold.js';

const registry = defaultRegistry();
const config = parseCampaignConfig({ rewards: { staleStepTolerance: 1 } });
const campaigns = new Map<string, CampaignRow | undefined>([
  ['c1', { campaignId: 'c1', name: 'c1', rawConfig: {}, config, status: 'running', configVersion: 1 }],
  ['nope', undefined],
]);

let offset = 0;
function group(taskId: string, step: number, rewards: number[], over: Partial<Group> = {}): Group {
  const o = String(offset++);
  return {
    offset: o,
    eventId: eventIds.traceRolloutGroup('c1', 1, step, Number(o)),
    campaignId: 'c1',
    taskId,
    step,
    rewards,
    policyVersion: `p${step}`,
    key: Buffer.from(taskId),
    value: Buffer.from(o),
    ...over,
  };
}

describe('decodeBatch', () => {
  it('turns bad bytes and a non-UUID event id into dead-letter notes and keeps the rest in offset order', () => {
    const ok = encode('RolloutGroupScored', {
      eventId: 'A0000000-0000-4000-8000-000000000001',
      campaignId: 'c1',
      taskId: 't',
      step: 1,
      policyVersion: 'p',
      rewards: [0.5],
      producedAt: 1,
    });
    const badId = encode('RolloutGroupScored', {
      eventId: 'not-a-uuid',
      campaignId: 'c1',
      taskId: 't',
      step: 1,
      policyVersion: 'p',
      rewards: [0.5],
      producedAt: 1,
    });
    const close = encode('StepClosed', {
      eventId: eventIds.traceStepClosed('c1', 1),
      campaignId: 'c1',
      step: 1,
      groupCount: 3,
      producedAt: 1,
    });
    const d = decodeBatch(
      [
        { offset: '10', key: null, value: Buffer.from('not avro at all') },
        { offset: '11', key: null, value: ok },
        { offset: '12', key: null, value: badId },
        { offset: '13', key: null, value: close },
      ],
      { topic: 'r', partition: 0, registry },
    );
    expect(d.dead.map((n) => [n.offset, n.code])).toEqual([
      ['10', 'bad-magic'],
      ['12', 'bad-event-id'],
    ]);
    expect(d.groups.map((g) => [g.offset, g.eventId])).toEqual([
      ['11', 'a0000000-0000-4000-8000-000000000001'],
    ]);
    expect(d.closings).toMatchObject([{ offset: '13', campaignId: 'c1', step: 1, groupCount: 3 }]);
  });
});

describe('foldGroups', () => {
  it('skips ids in the dedupe window, refuses stale steps and unknown campaigns, and tallies steps', () => {
    const first = group('t1', 1, [1, 0]);
    const stored = applyGroup(undefined, [0, 0], 3, config.detector).state;
    const folded = foldGroups({
      groups: [
        first,
        group('t1', 2, [1, 1]),
        { ...first, offset: String(offset++) }, // the same group again, later
        group('t2', 1, [0.5]), // stale: t2's last step is 3, tolerance 1
        group('t2', 3, [0.25, 0.75]),
        group('t3', 3, [0.5], { campaignId: 'nope' }),
      ],
      campaigns,
      stored: [{ campaignId: 'c1', taskId: 't2', state: stored, recentEventIds: [] }],
      dedupeWindow: 2,
    });
    expect([folded.applied, folded.duplicates]).toEqual([3, 1]);
    expect(folded.dead.map((d) => d.code)).toEqual(['stale-step', 'unknown-campaign']);
    // The refusal of a registered campaign's group is tallied by the batch (once: recordRefusals).
    expect(folded.refused).toEqual([
      { campaignId: 'c1', eventId: expect.any(String), step: 1, code: 'stale-step' },
    ]);
    expect(folded.touched.map((t) => [t.taskId, t.state.groups, t.recentEventIds.length])).toEqual([
      ['t1', 2, 2],
      ['t2', 2, 1],
    ]);
    expect(
      folded.tallies
        .all()
        .map((t) => [t.step, t.tally.groups, t.rejected])
        .sort(),
    ).toEqual([
      [1, 1, 0],
      [2, 1, 0],
      [3, 1, 0],
    ]);
    // One entry per task and step; t1's first group sets its band (no band before it).
    expect(folded.steps.map((e) => [e.taskId, e.step, e.groups, e.bandBefore === null])).toEqual([
      ['t1', 1, 1, true],
      ['t1', 2, 1, false],
      ['t2', 3, 1, false],
    ]);
    expect(folded.steps[1]!.bandBefore).toBe(folded.steps[0]!.state.band);
  });

  it('keeps the window to its size, oldest ids dropped first', () => {
    const gs = [group('t9', 1, [1]), group('t9', 2, [1]), group('t9', 3, [1])];
    const folded = foldGroups({ groups: gs, campaigns, stored: [], dedupeWindow: 2 });
    expect(folded.touched[0]!.recentEventIds).toEqual([gs[1]!.eventId, gs[2]!.eventId]);
  });
});

describe('statsEvents', () => {
  it('records each step once per campaign, with every task it changed, their bands before, ids from the first task and its group count', () => {
    const gs = [
      group('a', 1, [0]),
      group('b', 1, [1]),
      group('a', 2, [1]),
      group('a', 1, [1]), // a second group of a for step 1, after its step-2 group
      group('c', 2, [0.5], { campaignId: 'c2' }),
    ];
    const two = new Map([...campaigns, ['c2', { ...campaigns.get('c1')!, campaignId: 'c2', name: 'c2' }]]);
    const folded = foldGroups({ groups: gs, campaigns: two, stored: [], dedupeWindow: 64 });
    const byCampaign = statsEvents(registry, folded.steps, () => 7);
    expect([...byCampaign.keys()]).toEqual(['c1', 'c2']);
    const events = byCampaign.get('c1')!;
    expect(events.map((e) => [e.type, (e.payload as { step: number }).step])).toEqual([
      ['StepStatsRecorded', 1],
      ['StepStatsRecorded', 2],
    ]);
    const [s1, s2] = events.map((e) => {
      const p = e.payload as EventPayloads['StepStatsRecorded'];
      return { ...p, tasks: stepStatsEntries(p.tasks) };
    });
    // Step 1: a after both its step-1 groups (3 groups in all by then), then b.
    expect(s1!.groups).toBe(3);
    expect(s1!.tasks.map((t) => [t.taskId, t.groupCount, t.count, t.bandBefore])).toEqual([
      ['a', 3, 3, null],
      ['b', 1, 1, null],
    ]);
    expect(s1!.tasks[0]).toMatchObject({ mean: 2 / 3, latestGroupMean: 1, lastStep: 2, band: 'mastered' });
    // Step 2: a moved from hard (its first step-1 group) to mastered.
    expect(s2!.tasks).toEqual([
      expect.objectContaining({ taskId: 'a', groupCount: 2, bandBefore: 'hard', band: 'mastered' }),
    ]);
    expect(events.map((e) => e.eventId)).toEqual([
      eventIds.stepStatsRecorded('c1', 1, 'a', 3),
      eventIds.stepStatsRecorded('c1', 2, 'a', 2),
    ]);
    expect(events[0]!.metadata).toEqual({ producer: 'rods-aggregator' });
  });

  it('splits a step with more tasks than one record holds', () => {
    const gs = Array.from({ length: MAX_TASKS_PER_RECORD + 3 }, (_, i) => group(`t${i}`, 4, [0.5]));
    const folded = foldGroups({ groups: gs, campaigns, stored: [], dedupeWindow: 64 });
    const events = statsEvents(registry, folded.steps, () => 7).get('c1')!;
    const tasks = events.map((e) =>
      stepStatsEntries((e.payload as EventPayloads['StepStatsRecorded']).tasks),
    );
    expect(tasks.map((t) => t.length)).toEqual([MAX_TASKS_PER_RECORD, 3]);
    expect(tasks[1]![0]!.taskId).toBe(`t${MAX_TASKS_PER_RECORD}`);
    expect(new Set(events.map((e) => e.eventId)).size).toBe(2);
  });
});
