// The reusable encoder of one event gives encode()'s bytes and errors (no services).
import { describe, expect, it } from 'vitest';
import type { EventName } from '../../schemas/types.generated.js';
import { SAMPLE_EVENTS } from '../../test/support/codec/samples.js';
import { decode, encode, encoderFor } from './registry.js';

describe('encoderFor', () => {
  it('gives the bytes encode() gives, for every event', () => {
    for (const [name, payload] of Object.entries(SAMPLE_EVENTS) as [EventName, never][])
      expect(encoderFor(name)(payload).equals(encode(name, payload)), name).toBe(true);
  });

  it('returns records that do not share its scratch space, and grows it for a large payload', () => {
    const enc = encoderFor('RolloutGroupScored');
    const base = SAMPLE_EVENTS.RolloutGroupScored;
    const small = enc({ ...base, taskId: 'a' });
    const large = enc({ ...base, taskId: 'b', rewards: Array.from({ length: 1000 }, (_, i) => i / 1000) });
    const again = enc({ ...base, taskId: 'c' });
    expect(large.length).toBeGreaterThan(8000);
    expect((decode(small).payload as { taskId: string }).taskId).toBe('a');
    expect((decode(again).payload as { taskId: string }).taskId).toBe('c');
    expect(decode(large).payload).toMatchObject({ taskId: 'b', rewards: expect.arrayContaining([0.999]) });
    expect(
      large.equals(
        encode('RolloutGroupScored', {
          ...base,
          taskId: 'b',
          rewards: Array.from({ length: 1000 }, (_, i) => i / 1000),
        }),
      ),
    ).toBe(true);
  });

  it('throws the EncodeError encode() throws for a payload that does not fit', () => {
    const bad = [
      { ...SAMPLE_EVENTS.RolloutGroupScored, step: 'three' },
      { ...SAMPLE_EVENTS.RolloutGroupScored, extra: 1 },
    ] as never[];
    for (const p of bad) {
      let expected: unknown;
      try {
        encode('RolloutGroupScored', p);
      } catch (e) {
        expected = e;
      }
      expect(expected).toBeInstanceOf(Error);
      expect(() => encoderFor('RolloutGroupScored')(p)).toThrow((expected as Error).message);
    }
    expect(() => encoderFor('NoSuchEvent' as EventName)({} as never)).toThrow(/unknown event/);
  });
});
