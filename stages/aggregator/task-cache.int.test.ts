// The in-memory task cache never stands in for a stored row that changed: a partition applied
// meanwhile by another instance, or a batch that rolled back, must leave the statistics and the
// dedupe windows exactly as without the cache.
import { randomUUID } from 'node:crypto';
import { afterAll, describe, expect, it } from 'vitest';
import { defaultRegistry } from '../../platform/codec/registry.js';
import { registerCampaign } from '../../platform/store/campaigns.js';
import { createPool } from '../../platform/store/db.js';
import { queryStats } from '../../platform/store/task-stats/view.js';
import { type BatchDeps, processBatch } from './batch.js';
import { CampaignCache } from './campaign-cache.js';
import { TaskStateCache } from './task-cache.js';
import { encodeRecord, referenceStats, type TraceGroup } from './trace.js';

const pool = createPool({ application: 'rods-task-cache-test', max: 4 });
afterAll(() => pool.end());
const registry = defaultRegistry();

function member(tasks?: TaskStateCache, deadLetter: BatchDeps['deadLetter'] = async () => {}): BatchDeps {
  return {
    pool,
    registry,
    campaigns: new CampaignCache(pool),
    groupId: 'task-cache-test',
    deadLetter,
    dedupeWindow: 4,
    tasks,
  };
}

function group(campaignId: string, taskId: string, step: number, reward: number): TraceGroup {
  return { eventId: randomUUID(), campaignId, taskId, step, rewards: new Array(16).fill(reward) };
}

/** The groups as records of one partition, from `offset` on. */
function records(campaignId: string, groups: TraceGroup[], offset: number) {
  return groups.map((g, i) => {
    const r = encodeRecord({ kind: 'group', group: g }, campaignId);
    return { offset: String(offset + i), key: Buffer.from(r.key), value: r.value };
  });
}

describe('the task cache', () => {
  it('re-reads a task another instance applied groups to, and still recognises their ids as duplicates', async () => {
    const campaignId = `tcache-${randomUUID().slice(0, 8)}`;
    await registerCampaign(pool, { campaignId });
    const topic = `tcache.${campaignId}`;
    const a = new TaskStateCache();
    const first = [group(campaignId, 't1', 1, 0.5), group(campaignId, 't1', 2, 0.1)];
    expect((await processBatch(member(a), topic, 0, records(campaignId, first, 0))).applied).toBe(2);
    expect(a.versionOf(`${campaignId}\u0000t1`)?.groups).toBe(2);

    // The partition moves to another instance, which applies two more groups of the task.
    const second = [group(campaignId, 't1', 3, 0.9), group(campaignId, 't1', 4, 0.3)];
    expect(
      (await processBatch(member(new TaskStateCache()), topic, 0, records(campaignId, second, 2))).applied,
    ).toBe(2);

    // Back at the first instance: its cached task (2 groups) is stale. A re-sent group of the
    // other instance's batch is a duplicate only if the stored window was read.
    const third = [{ ...second[1]! }, group(campaignId, 't1', 5, 1)];
    const r = await processBatch(member(a), topic, 0, records(campaignId, third, 4));
    expect(r.duplicates).toBe(1);
    expect(r.applied).toBe(1);
    const [row] = await queryStats(pool, { campaignId });
    const ref = referenceStats([...first, ...second, third[1]!]).get('t1')!;
    expect(row!.groups).toBe(5);
    expect(row!.mean).toBeCloseTo(ref.mean, 12);
    expect(row!.variance).toBeCloseTo(ref.variance, 12);
    expect(a.versionOf(`${campaignId}\u0000t1`)).toEqual({ groups: 5, lastEventId: third[1]!.eventId });

    // The stored window is the newest 4 ids, as the in-memory one was.
    const { rows } = await pool.query<{ ids: string[] }>(
      'select recent_event_ids as ids from task_stats where campaign_id = $1',
      [campaignId],
    );
    expect(rows[0]!.ids).toEqual([first[1], ...second, third[1]].map((g) => g!.eventId));
  });

  it('keeps nothing of a batch whose transaction rolled back', async () => {
    const campaignId = `tcache-${randomUUID().slice(0, 8)}`;
    await registerCampaign(pool, { campaignId });
    const topic = `tcache.${campaignId}`;
    const cache = new TaskStateCache();
    await processBatch(member(cache), topic, 0, records(campaignId, [group(campaignId, 't1', 1, 0.5)], 0));
    // A batch with an unknown campaign's group fails at its dead letter, after the fold.
    const failing = [group(campaignId, 't1', 2, 0.25), group('no-such-campaign', 't1', 2, 0.5)];
    const refuse = async () => {
      throw new Error('dead-letter topic away');
    };
    await expect(
      processBatch(member(cache, refuse), topic, 0, records(campaignId, failing, 1)),
    ).rejects.toThrow('dead-letter topic away');
    expect(cache.versionOf(`${campaignId}\u0000t1`)?.groups).toBe(1);
    // Delivered again: the group that was folded in the rolled-back batch counts now, once.
    const again = await processBatch(member(cache), topic, 0, records(campaignId, failing, 1));
    expect(again.applied).toBe(1);
    expect(again.duplicates).toBe(0);
    const [row] = await queryStats(pool, { campaignId });
    expect(row!.groups).toBe(2);
    expect(row!.latestMean).toBe(0.25);
  });

  it('drops the least recently used tasks beyond its capacity', () => {
    const cache = new TaskStateCache(2);
    const update = (taskId: string) => ({
      campaignId: 'c',
      taskId,
      lastEventId: randomUUID(),
      policyVersion: 'p',
      newEventIds: [],
      recentEventIds: [],
      state: { groups: 1 } as never,
    });
    cache.committed([update('a'), update('b')]);
    cache.take('c', 'a');
    cache.committed([update('c')]);
    expect(cache.size).toBe(2);
    expect(cache.versionOf('c\u0000a')).toBeDefined();
    expect(cache.versionOf('c\u0000b')).toBeUndefined();
  });
});
