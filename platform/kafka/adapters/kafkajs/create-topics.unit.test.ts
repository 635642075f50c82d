// Creating topics waits until every new partition has a leader, riding out the moment when a
// broker does not know the new topic yet (kafkajs's own wait gives up on it at once).
import type { Admin } from 'kafkajs';
import { describe, expect, it } from 'vitest';
import type { TopicSpec } from '../../topology.js';
import { topicAdmin } from './index.js';

const spec: TopicSpec = {
  name: 't',
  key: 'task',
  partitions: 2,
  replicationFactor: 1,
  config: {},
  doc: 'test',
};

function adminAnswering(answers: ({ type: string } | number[])[]) {
  let metadataCalls = 0;
  const a = {
    createTopics: async () => true,
    fetchTopicMetadata: async () => {
      metadataCalls++;
      const next = answers.shift();
      if (next === undefined) throw new Error('no more answers');
      if (!Array.isArray(next)) throw Object.assign(new Error(next.type), next);
      return {
        topics: [{ name: 't', partitions: next.map((leader, partitionId) => ({ partitionId, leader })) }],
      };
    },
  } as unknown as Admin;
  return { admin: topicAdmin(a), metadataCalls: () => metadataCalls };
}

describe('createTopics', () => {
  it('waits through "unknown topic" and leaderless partitions until every partition has a leader', async () => {
    const f = adminAnswering([{ type: 'UNKNOWN_TOPIC_OR_PARTITION' }, [1, -1], [1, 1]]);
    await f.admin.createTopics([spec]);
    expect(f.metadataCalls()).toBe(3);
  });

  it('throws any other metadata error at once', async () => {
    const f = adminAnswering([{ type: 'TOPIC_AUTHORIZATION_FAILED' }]);
    await expect(f.admin.createTopics([spec])).rejects.toThrow('TOPIC_AUTHORIZATION_FAILED');
    expect(f.metadataCalls()).toBe(1);
  });
});

describe('fetchTopicOffsets', () => {
  it('retries a partition whose leader is still taking over, and throws other errors at once', async () => {
    const errors: { type: string }[] = [
      { type: 'NOT_LEADER_FOR_PARTITION' },
      { type: 'LEADER_NOT_AVAILABLE' },
    ];
    let calls = 0;
    const a = {
      fetchTopicOffsets: async () => {
        calls++;
        const e = errors.shift();
        if (e) throw Object.assign(new Error(e.type), e);
        return [{ partition: 0, offset: '5', high: '5', low: '0' }];
      },
    } as unknown as Admin;
    const offsets = await topicAdmin(a).fetchTopicOffsets('t');
    expect(offsets).toHaveLength(1);
    expect(calls).toBe(3);
    errors.push({ type: 'TOPIC_AUTHORIZATION_FAILED' });
    await expect(topicAdmin(a).fetchTopicOffsets('t')).rejects.toThrow('TOPIC_AUTHORIZATION_FAILED');
  });
});
