// The batch body hash and the claim check's groups text (no services): the canonical JSON written
// directly for a batch's fixed shape is what the general canonical encoder gives.
import { createHash } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import type { RolloutBatchBody } from '../../platform/kafka/rollout-records.js';
import { canonicalJson } from '../../platform/store/events/canonical.js';
import { readStoredRolloutBatch, storedRolloutBatch } from '../../platform/store/steps/batches.js';
import { batchBodyHash, canonicalGroupsJson } from './ingest.js';
import { RolloutBatch } from './schemas.js';

const general = (b: RolloutBatch) =>
  createHash('sha256')
    .update(
      canonicalJson({
        batchId: b.batchId,
        policyVersion: b.policyVersion,
        groups: b.groups.map((g) => ({ taskId: g.taskId, rewards: g.rewards })),
        close: b.close ?? false,
      }),
      'utf8',
    )
    .digest('hex');

describe('the canonical JSON of a batch', () => {
  const batches = [
    { batchId: 'b', policyVersion: 'p', groups: [{ taskId: 't', rewards: [0.5, 1] }] },
    { batchId: 'b.2-x', policyVersion: 'ckpt "7" \\ é', groups: [], close: true },
    {
      batchId: 'b3',
      policyVersion: '😀 v',
      close: false,
      groups: [
        { taskId: 'multi_turn_base_17~s3', rewards: [0, 1e-7, 0.1 + 0.2, 1 / 3, 1] },
        { taskId: 'tâche "q"\\😀', rewards: [-0, 0.000001, 0.5] },
        { taskId: 'x'.repeat(200), rewards: Array.from({ length: 64 }, (_, i) => i / 63) },
      ],
    },
  ].map((b) => RolloutBatch.parse(b));

  it('is the general canonical encoding, so body hashes stay what they were', () => {
    for (const b of batches) {
      expect(canonicalGroupsJson(b.groups)).toBe(canonicalJson(b.groups));
      expect(batchBodyHash(b)).toBe(general(b));
    }
  });

  it('round-trips through the claim check, which also reads the claim checks written before', () => {
    const b = batches[2]!;
    const body: RolloutBatchBody = {
      campaignId: 'c',
      step: 4,
      batchId: b.batchId,
      policyVersion: b.policyVersion,
      groups: b.groups,
      close: false,
      receivedAt: 1_764_547_200_000,
    };
    const stored = JSON.parse(JSON.stringify(storedRolloutBatch(body, canonicalGroupsJson(b.groups))));
    expect(stored).not.toHaveProperty('groups');
    // JSON keeps -0 as 0 (so does the record encoder: rolloutGroupRecords).
    expect(readStoredRolloutBatch(stored)).toEqual({
      ...body,
      groups: body.groups.map((g) => ({ ...g, rewards: g.rewards.map((r) => r + 0) })),
    });
    const before = { ...body, groups: [{ taskId: 't', rewards: [0.5] }] };
    expect(readStoredRolloutBatch(JSON.parse(JSON.stringify(before)))).toEqual(before);
  });
});
