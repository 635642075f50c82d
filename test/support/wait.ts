// Waiting in tests on what other processes do (an event recorded, an offset committed, a request
// received) by polling with a deadline, instead of sleeping for a guessed time. A positive wait
// returns as soon as the condition holds and fails at its deadline saying what it waited for; a
// negative check polls for its whole window and fails as soon as the unwanted thing appears.
import { setTimeout as sleep } from 'node:timers/promises';

export interface WaitOptions {
  /** What is awaited (or, for staysFalse, what must not happen), for the failure message; a
   * function is asked at the failure, so it can show the last state seen. */
  what: string | (() => string);
  /** Deadline of waitUntil (default 60 s). */
  timeoutMs?: number;
  /** Pause between two probes (default 50 ms). */
  intervalMs?: number;
}

export class WaitTimeout extends Error {
  override name = 'WaitTimeout';
}

export class HeldFalse extends Error {
  override name = 'HeldFalse';
}

const describeWhat = (what: WaitOptions['what']) => (typeof what === 'function' ? what() : what);

/** A probe's "not yet": undefined, null or false (0 and '' are values). */
type Found<T> = Exclude<T, undefined | null | false>;
const found = <T>(v: T): v is Found<T> => v !== undefined && v !== null && v !== false;

/**
 * Polls `probe` until it returns something other than undefined, null or false, and returns it.
 * Throws WaitTimeout once the deadline passed with the probe still unsatisfied (it is probed one
 * last time at the deadline). An error thrown by the probe ends the wait with that error.
 */
export async function waitUntil<T>(probe: () => T | Promise<T>, opts: WaitOptions): Promise<Found<T>> {
  const timeoutMs = opts.timeoutMs ?? 60_000;
  const intervalMs = opts.intervalMs ?? 50;
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const v = await probe();
    if (found(v)) return v;
    const left = deadline - Date.now();
    if (left <= 0)
      throw new WaitTimeout(`waited ${timeoutMs} ms for ${describeWhat(opts.what)}: it did not happen`);
    await sleep(Math.min(intervalMs, left));
  }
}

/**
 * Checks `cond` again and again for `windowMs` (first at once, last at the end of the window) and
 * throws HeldFalse as soon as it is false.
 */
export async function holdsFor(
  cond: () => boolean | Promise<boolean>,
  windowMs: number,
  opts: Omit<WaitOptions, 'timeoutMs'>,
): Promise<void> {
  const intervalMs = opts.intervalMs ?? 50;
  const end = Date.now() + windowMs;
  for (;;) {
    if (!(await cond())) throw new HeldFalse(`within ${windowMs} ms: ${describeWhat(opts.what)}`);
    const left = end - Date.now();
    if (left <= 0) return;
    await sleep(Math.min(intervalMs, left));
  }
}

/** The negative check: `unwanted` stays false for the whole window (see holdsFor). */
export function staysFalse(
  unwanted: () => boolean | Promise<boolean>,
  windowMs: number,
  opts: Omit<WaitOptions, 'timeoutMs'>,
): Promise<void> {
  return holdsFor(async () => !(await unwanted()), windowMs, opts);
}
