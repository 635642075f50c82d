// Reading a campaign's groups in step order from a multi-partition topic: a step counts as read
// only once every partition holding the campaign's groups was read past it, so nothing of it comes
// after; with a small fetch, what is handed over at once is a part of the campaign, not all of it.
import { randomUUID } from 'node:crypto';
import { afterAll, describe, expect, it } from 'vitest';
import { withAdmin } from '../../platform/kafka/client.js';
import { encodeRecord, freshRewardTopic, produceTrace } from '../../stages/aggregator/trace.js';
import { forEachCampaignGroupInOrder } from './reward-stream.js';

const topics: string[] = [];
afterAll(() => withAdmin((a) => a.deleteTopics(topics)));

describe('a campaign read in step order', () => {
  it('says a step is read only once every partition is past it, batch by batch', async () => {
    const campaignId = `inorder-${randomUUID().slice(0, 8)}`;
    const topic = await freshRewardTopic('inorder.rewards', 3);
    topics.push(topic);
    const steps = 40;
    const tasks = 12;
    const records = [];
    for (let step = 1; step <= steps; step++)
      for (let t = 0; t < tasks; t++)
        records.push(
          encodeRecord(
            {
              kind: 'group',
              group: {
                eventId: randomUUID(),
                campaignId,
                taskId: `t${t}`,
                step,
                rewards: Array(16).fill(0.5),
              },
            },
            campaignId,
          ),
        );
    // Another campaign's groups on the same partitions: read past, never handed over.
    for (let t = 0; t < 50; t++)
      records.push(
        encodeRecord(
          {
            kind: 'group',
            group: { eventId: randomUUID(), campaignId: 'other', taskId: `t${t}`, step: 1, rewards: [1] },
          },
          'other',
        ),
      );
    // A send per step: Kafka hands over whole producer batches, so small sends make small fetches.
    for (let i = 0; i < records.length; i += tasks) await produceTrace(topic, records.slice(i, i + tasks));

    const seen: number[] = [];
    let batches = 0;
    let largest = 0;
    const declaredRead = new Set<number>();
    await forEachCampaignGroupInOrder(
      topic,
      campaignId,
      [0, 1, 2],
      async (groups, readPast) => {
        batches++;
        largest = Math.max(largest, groups.length);
        for (const g of groups) {
          // Nothing of a step comes after the step was said to be read.
          expect(declaredRead.has(g.step)).toBe(false);
          seen.push(g.step);
        }
        for (let s = 1; s <= steps; s++) if (readPast(s)) declaredRead.add(s);
      },
      // A few kilobytes a fetch: the campaign comes in many small batches.
      4096,
    );
    expect(seen).toHaveLength(steps * tasks);
    expect(batches).toBeGreaterThan(5);
    expect(largest).toBeLessThan((steps * tasks) / 3);
    expect(declaredRead.size).toBeGreaterThan(steps / 2);
  });
});
