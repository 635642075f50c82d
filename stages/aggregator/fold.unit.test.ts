// The batch pipeline's pure seams: decoding (bad bytes and bad ids become dead-letter notes),
// folding (dedupe window, reward limits, unknown campaigns, band changes, step tallies) and the
// events derived from a fold (ids derived from the source group, order kept).
import { describe, expect, it } from 'vitest';
import { parseCampaignConfig } from '../../domain/campaign-config.js';
import { eventIds } from '../../domain/ids.js';
import { applyGroup } from '../../domain/task-stats.js';
import { defaultRegistry, encode } from '../../platform/codec/registry.js';
import type { CampaignRow } from '../../platform/store/campaigns.js';
import { decodeBatch, type Group } from './decode.js';
import { statsEvents } from './events.js';
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
    // t1's first group sets its band; each band change names the group that caused it.
    expect(folded.bandChanges[0]).toMatchObject({ taskId: 't1', from: null, sourceEventId: first.eventId });
  });

  it('keeps the window to its size, oldest ids dropped first', () => {
    const gs = [group('t9', 1, [1]), group('t9', 2, [1]), group('t9', 3, [1])];
    const folded = foldGroups({ groups: gs, campaigns, stored: [], dedupeWindow: 2 });
    expect(folded.touched[0]!.recentEventIds).toEqual([gs[1]!.eventId, gs[2]!.eventId]);
  });
});

describe('statsEvents', () => {
  it('emits the band changes in order, then one TaskStatsUpdated per task with ids derived from the groups', () => {
    const gs = [group('a', 1, [0]), group('b', 1, [1]), group('a', 2, [1])];
    const folded = foldGroups({ groups: gs, campaigns, stored: [], dedupeWindow: 64 });
    const events = statsEvents(registry, folded, () => 7).get('c1')!;
    expect(events.map((e) => e.type)).toEqual([
      ...folded.bandChanges.map(() => 'TaskBandChanged'),
      'TaskStatsUpdated',
      'TaskStatsUpdated',
    ]);
    expect(events[0]!.eventId).toBe(eventIds.taskBandChanged(gs[0]!.campaignId, gs[0]!.eventId));
    const updates = events.filter((e) => e.type === 'TaskStatsUpdated');
    expect(updates.map((e) => e.eventId)).toEqual([
      eventIds.taskStatsUpdated(gs[2]!.campaignId, gs[2]!.eventId),
      eventIds.taskStatsUpdated(gs[1]!.campaignId, gs[1]!.eventId),
    ]);
    expect(updates[0]!.metadata).toEqual({ producer: 'rods-aggregator', causationId: gs[2]!.eventId });
  });
});
