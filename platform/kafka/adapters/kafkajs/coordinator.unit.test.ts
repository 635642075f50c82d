// Reading a group's committed offsets rides out a coordinator that is moving or loading (kafkajs
// throws NOT_COORDINATOR_FOR_GROUP at once), and still throws other errors at once.
import type { Admin } from 'kafkajs';
import { describe, expect, it } from 'vitest';
import { topicAdmin } from './index.js';

function adminFailing(errors: { type: string }[]) {
  let calls = 0;
  const a = {
    fetchOffsets: async () => {
      calls++;
      const e = errors.shift();
      if (e) throw Object.assign(new Error(e.type), e);
      return [{ topic: 't', partitions: [{ partition: 0, offset: '7', metadata: 'm' }] }];
    },
  } as unknown as Admin;
  return { admin: topicAdmin(a), calls: () => calls };
}

describe('committed offsets through a moving coordinator', () => {
  it('retries NOT_COORDINATOR_FOR_GROUP and GROUP_LOAD_IN_PROGRESS (kafkajs names) until the fetch answers', async () => {
    const f = adminFailing([{ type: 'NOT_COORDINATOR_FOR_GROUP' }, { type: 'GROUP_LOAD_IN_PROGRESS' }]);
    await expect(f.admin.fetchCommittedOffsets('g', 't')).resolves.toEqual([
      { partition: 0, offset: '7', metadata: 'm' },
    ]);
    expect(f.calls()).toBe(3);
  });

  it('throws any other error at once', async () => {
    const f = adminFailing([{ type: 'GROUP_AUTHORIZATION_FAILED' }]);
    await expect(f.admin.fetchCommittedOffsets('g', 't')).rejects.toThrow('GROUP_AUTHORIZATION_FAILED');
    expect(f.calls()).toBe(1);
  });
});
