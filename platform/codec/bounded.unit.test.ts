// Declared lengths are checked against the bytes left before avsc allocates from them: a
// 100-byte record that declares 2^31 - 1 array items used to exhaust the heap of whatever read it.
import avsc from 'avsc';
import { describe, expect, it } from 'vitest';
import { mapBomb, rewardsArrayBomb, stringBomb, varint } from '../../test/support/codec/bombs.js';
import { SAMPLE_EVENTS } from '../../test/support/codec/samples.js';
import { DeclaredLengthError, lengthChecker } from './bounded.js';
import { DecodeError } from './errors.js';
import { decode, defaultRegistry, encode } from './registry.js';

/** A RolloutGroupScored whose rewards array declares `count` items but holds one. */
function rewardsBomb(count: number): Buffer {
  const { eventId, campaignId, taskId } = SAMPLE_EVENTS.RolloutGroupScored;
  return rewardsArrayBomb({ eventId, campaignId, taskId }, count);
}

describe('bounded decoding', () => {
  it('passes every sample event unchanged', () => {
    for (const [name, payload] of Object.entries(SAMPLE_EVENTS)) {
      const bytes = encode(name as keyof typeof SAMPLE_EVENTS, payload as never);
      expect(decode(bytes).payload, name).toEqual(payload);
    }
  });

  it('refuses a 92-byte record declaring 2^31 - 1 rewards, without allocating them', () => {
    const bomb = rewardsBomb(2 ** 31 - 1);
    expect(bomb.length).toBeLessThan(200);
    const e = (() => {
      try {
        decode(bomb);
      } catch (err) {
        return err;
      }
    })() as DecodeError;
    expect(e).toBeInstanceOf(DecodeError);
    expect(e.code).toBe('declared-length');
    expect(e.message).toMatch(
      /rewards: array declares 2147483647 items, at least 8 bytes each, \d+ bytes left/,
    );
    // The same shape with a count that fits is read as the (truncated) record it is.
    expect(() => decode(rewardsBomb(2))).toThrow(DecodeError);
  });

  it("refuses the soak's string and map bombs in registered schemas, naming the field", () => {
    const t = { eventId: '0b7e8c1e-6f0f-4d3c-9d7e-1f2a3b4c5d6e', campaignId: 'c', taskId: 't' };
    for (const [bomb, field] of [
      [stringBomb(t), /policyVersion: string declares 2147483647 bytes/],
      [mapBomb(t), /judgeScores: map declares 2147483647 items/],
    ] as const) {
      expect(bomb.length).toBeLessThan(400);
      expect(() => decode(bomb)).toThrow(field);
      expect(() => decode(bomb)).toThrow(DecodeError);
    }
    // Their honest forms decode.
    expect(decode(stringBomb(t, 'bomb-policy-version-00'.length)).name).toBe('RolloutGroupScored');
    expect(decode(mapBomb(t, 1)).name).toBe('CandidateValidated');
  });

  it('refuses a map, a string and bytes whose declared length exceeds the body, and zero-byte items', () => {
    const map = lengthChecker(avsc.Type.forSchema({ type: 'map', values: 'null' }));
    expect(() => map(Buffer.from([...varint(2 ** 31 - 1), 0x02, 0x61]))).toThrow(
      /map declares 2147483647 items/,
    );
    const str = lengthChecker(avsc.Type.forSchema('string'));
    expect(() => str(Buffer.from([...varint(2 ** 40), 0x61]))).toThrow(
      /string declares 1099511627776 bytes, 1 left/,
    );
    const bytes = lengthChecker(avsc.Type.forSchema('bytes'));
    expect(() => bytes(Buffer.from([...varint(5), 1, 2]))).toThrow(/bytes declares 5 bytes, 2 left/);
    // An array of nulls takes no bytes per item; each still counts as one, so 10 need 10 bytes.
    const nulls = lengthChecker(avsc.Type.forSchema({ type: 'array', items: 'null' }));
    expect(() => nulls(Buffer.from([...varint(10), 0x00]))).toThrow(DeclaredLengthError);
    expect(nulls(Buffer.from([...varint(1), 0x00]))).toBe(2);
    // A negative count (a block with its byte size) is checked as well.
    const arr = lengthChecker(avsc.Type.forSchema({ type: 'array', items: 'long' }));
    expect(() => arr(Buffer.from([0x01, ...varint(2 ** 30)]))).toThrow(/block declares/);
    expect(() =>
      arr(Buffer.from([...varint(2 ** 40).map((b, i, a) => (i === a.length - 1 ? b | 0x80 : b))])),
    ).toThrow(/array count cut off/);
    // The count of a negative block is checked before its (here cut off) byte size is read.
    expect(() => arr(Buffer.from([0xa1, 0x80, 0xe8, 0xf0, 0xb0, 0xd0, 0x67]))).toThrow(
      /array declares \d+ items/,
    );
  });

  it('never lets a corrupted record reach avsc with a length it cannot back (random mutations)', () => {
    const registry = defaultRegistry();
    const base = encode('RolloutGroupScored', {
      ...SAMPLE_EVENTS.RolloutGroupScored,
      rewards: [0.1, 0.2, 0.3],
    });
    let seed = 7;
    const rnd = () => {
      seed = (seed * 1103515245 + 12345) % 2 ** 31;
      return seed / 2 ** 31;
    };
    for (let i = 0; i < 20_000; i++) {
      const b = Buffer.from(base);
      const flips = 1 + Math.floor(rnd() * 4);
      for (let f = 0; f < flips; f++) b[10 + Math.floor(rnd() * (b.length - 10))] = Math.floor(rnd() * 256);
      try {
        const d = registry.decode(b);
        const rewards = (d.payload as { rewards: number[] }).rewards;
        expect(rewards.length).toBeLessThanOrEqual(b.length);
      } catch (e) {
        expect(e).toBeInstanceOf(DecodeError);
      }
    }
  });
});
