import { createHash } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { defaultRegistry } from '../codec/registry.js';
import { DLQ_KEPT_BYTES, fitDeadLetter } from './dlq.js';
import { MIN_RECORD_BYTES } from './topology.js';

describe('dead letters fit under the record limit', () => {
  it('keeps small originals whole', () => {
    const input = { key: Buffer.from('k'), value: Buffer.from('not avro'), reason: 'bad magic' };
    expect(fitDeadLetter(input, 1_000_000)).toEqual(input);
  });

  it('keeps the first bytes of a big value and key, with size and SHA-256 in the reason', () => {
    const value = Buffer.alloc(10 * 1024 * 1024, 0x78);
    const key = Buffer.alloc(200_000, 0x6b);
    const fit = fitDeadLetter({ key, value, reason: 'bad magic' }, 1_000_000);
    expect(fit.value!.length).toBe(DLQ_KEPT_BYTES);
    expect(fit.key!.length).toBe(DLQ_KEPT_BYTES);
    const sha = createHash('sha256').update(value).digest('hex');
    expect(fit.reason).toContain(
      `value: first ${DLQ_KEPT_BYTES} of ${value.length} bytes kept, sha256 ${sha}`,
    );
    expect(fit.reason).toContain(`key: first ${DLQ_KEPT_BYTES} of 200000 bytes kept`);
  });

  it('encodes under the limit even at the smallest limit, with a huge reason', () => {
    const registry = defaultRegistry();
    for (const limit of [MIN_RECORD_BYTES, 1_000_000]) {
      const fit = fitDeadLetter(
        { key: Buffer.alloc(5_000_000), value: Buffer.alloc(5_000_000), reason: 'é'.repeat(1_000_000) },
        limit,
      );
      const record = registry.encode('DeadLettered', {
        eventId: '0b7e8c1e-57a4-4d0e-9a43-2f1c1d6b1a14',
        reasonCode: 'processing-failed',
        reason: fit.reason,
        sourceTopic: 'rods.rewards.v1',
        partition: 0,
        offset: 1,
        key: fit.key,
        value: fit.value,
        occurredAt: 1,
      });
      expect(record.length, `limit ${limit}`).toBeLessThan(limit - 1024);
    }
  });
});
