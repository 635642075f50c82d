import { describe, expect, it } from 'vitest';
import { HeldFalse, holdsFor, staysFalse, WaitTimeout, waitUntil } from './wait.js';

/** A probe that answers `value` from its n-th call on (undefined before), counting its calls. */
function fromCall<T>(n: number, value: T) {
  const probe = () => (++probe.calls >= n ? value : undefined);
  probe.calls = 0;
  return probe;
}

describe('waitUntil', () => {
  it('returns the first satisfied probe value, polling until then', async () => {
    const probe = fromCall(4, { offset: 7 });
    await expect(waitUntil(probe, { what: 'offset', intervalMs: 1 })).resolves.toEqual({ offset: 7 });
    expect(probe.calls).toBe(4);
  });

  it('counts 0 as a value and false as not yet', async () => {
    await expect(waitUntil(() => 0, { what: 'zero', intervalMs: 1 })).resolves.toBe(0);
    const flips = fromCall(3, true);
    await expect(waitUntil(() => flips() ?? false, { what: 'flag', intervalMs: 1 })).resolves.toBe(true);
  });

  it('fails at the deadline naming what it waited for, with the last state', async () => {
    let seen = 0;
    const err = await waitUntil(
      () => {
        seen++;
        return false;
      },
      { what: () => `the event (probed ${seen} times)`, timeoutMs: 30, intervalMs: 5 },
    ).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(WaitTimeout);
    expect((err as Error).message).toContain(`the event (probed ${seen} times)`);
    expect(seen).toBeGreaterThan(1);
  });

  it('ends with the error a probe throws', async () => {
    await expect(
      waitUntil(
        () => {
          throw new Error('probe broke');
        },
        { what: 'x' },
      ),
    ).rejects.toThrow('probe broke');
  });
});

describe('holdsFor and staysFalse', () => {
  it('keep probing for the whole window while the condition holds', async () => {
    let calls = 0;
    await holdsFor(
      () => {
        calls++;
        return true;
      },
      40,
      { what: 'still true', intervalMs: 5 },
    );
    expect(calls).toBeGreaterThan(2);
  });

  it('fail as soon as the unwanted thing appears, without waiting out the window', async () => {
    const appears = fromCall(3, true);
    const err = await staysFalse(() => appears() ?? false, 600_000, {
      what: 'a duplicate',
      intervalMs: 1,
    }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(HeldFalse);
    expect((err as Error).message).toContain('a duplicate');
    expect(appears.calls).toBe(3);
  });
});
