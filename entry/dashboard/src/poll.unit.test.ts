import { describe, expect, it } from 'vitest';
import { type PollHost, poll } from './poll.js';

/** A host with a hand-driven clock and visibility. */
function fakeHost() {
  let now = 0;
  let nextId = 1;
  let hidden = false;
  const timers = new Map<number, { at: number; fn: () => void }>();
  const visible = new Set<() => void>();
  const host: PollHost = {
    hidden: () => hidden,
    onVisible: (fn) => {
      visible.add(fn);
      return () => visible.delete(fn);
    },
    setTimeout: (fn, ms) => {
      timers.set(nextId, { at: now + ms, fn });
      return nextId++;
    },
    clearTimeout: (id) => void timers.delete(id),
  };
  return {
    host,
    pending: () => timers.size,
    /** Moves the clock, firing the timers that fall due. */
    advance(ms: number) {
      now += ms;
      for (const [id, t] of [...timers].sort((a, b) => a[1].at - b[1].at))
        if (t.at <= now) {
          timers.delete(id);
          t.fn();
        }
    },
    setHidden(h: boolean) {
      hidden = h;
      if (!h) for (const f of visible) f();
    },
  };
}

const flush = () => new Promise((r) => setImmediate(r));

describe('poll', () => {
  it('never overlaps: the next run is scheduled only after the previous one answered', async () => {
    const h = fakeHost();
    let runs = 0;
    let answer: (() => void) | undefined;
    const stop = poll(
      () => {
        runs++;
        return new Promise<void>((r) => {
          answer = r;
        });
      },
      3000,
      { host: h.host },
    );
    expect(runs).toBe(1);
    h.advance(10_000); // a slow answer: nothing is due while it is outstanding
    expect(runs).toBe(1);
    expect(h.pending()).toBe(0);
    answer!();
    await flush();
    expect(h.pending()).toBe(1);
    h.advance(2999);
    expect(runs).toBe(1);
    h.advance(1);
    expect(runs).toBe(2);
    stop();
    answer!();
    await flush();
    expect(h.pending()).toBe(0); // stopped: nothing scheduled after the last answer
  });

  it('does not poll while the page is hidden, and polls once when it is shown', async () => {
    const h = fakeHost();
    let runs = 0;
    const stop = poll(
      async () => {
        runs++;
      },
      1000,
      { host: h.host },
    );
    await flush();
    expect(runs).toBe(1);
    h.setHidden(true);
    h.advance(1000);
    await flush();
    h.advance(60_000);
    await flush();
    expect(runs).toBe(1);
    h.setHidden(false);
    await flush();
    expect(runs).toBe(2);
    h.advance(1000);
    await flush();
    expect(runs).toBe(3);
    stop();
  });

  it('waits one period first when asked to', async () => {
    const h = fakeHost();
    let runs = 0;
    const stop = poll(
      async () => {
        runs++;
      },
      500,
      { startNow: false, host: h.host },
    );
    await flush();
    expect(runs).toBe(0);
    h.advance(500);
    await flush();
    expect(runs).toBe(1);
    stop();
  });
});
