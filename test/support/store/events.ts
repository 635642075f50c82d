// Shared by the store's integration tests: unique stream ids, events, and polling helpers that
// tolerate other test files holding transactions open on the same database.
import { randomUUID } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import type pg from 'pg';
import {
  type Cursor,
  cursorOf,
  type NewEvent,
  type RecordedEvent,
  readPage,
} from '../../../platform/store/events/event-store.js';

export const FINGERPRINT = 'a1b2c3d4e5f60718';

/** A stream id nobody else uses. */
export function uniqueStream(prefix: string): string {
  return `${prefix}-${randomUUID()}`;
}

/**
 * An event of any type and payload with a fixed fingerprint: the store's tests write what the
 * product's typed write path never would, so the type is asserted here, not checked.
 */
export function newEvent(type: string, payload: unknown, metadata: NewEvent['metadata'] = {}): NewEvent {
  return { eventId: randomUUID(), type, fingerprint: FINGERPRINT, payload, metadata } as NewEvent;
}

/** Every event readable now after `after`, paging until an empty page. */
export async function readEverything(db: pg.Pool, after: Cursor, pageSize = 5000): Promise<RecordedEvent[]> {
  const out: RecordedEvent[] = [];
  let cursor = after;
  for (;;) {
    const page = await readPage(db, cursor, pageSize);
    out.push(...page);
    if (page.length < pageSize) return out;
    cursor = cursorOf(page[page.length - 1]!);
  }
}

/**
 * Polls fn until it returns a value accepted by done. Other test files may hold transactions
 * open for a moment, which holds the readers back; this waits them out (bounded by attempts).
 */
export async function eventually<T>(
  fn: () => Promise<T>,
  done: (v: T) => boolean,
  attempts = 400,
): Promise<T> {
  let last = await fn();
  for (let i = 0; i < attempts && !done(last); i++) {
    await sleep(25);
    last = await fn();
  }
  return last;
}
