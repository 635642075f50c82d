import { randomUUID } from 'node:crypto';
import { afterAll, describe, expect, it } from 'vitest';
import { createPool } from '../../platform/store/db.js';
import { latestAnchorId, verifyAnchor } from '../../platform/store/events/audit.js';
import { append } from '../../platform/store/events/event-store.js';
import { newEvent } from '../../test/support/store/events.js';
import { waitUntil } from '../../test/support/wait.js';
import { readPublishedAnchors, runPeriodicAnchor } from './anchor.js';

const pool = createPool({ application: 'rods-test-anchor', max: 3 });
afterAll(() => pool.end());

describe('the periodic audit anchor (relay)', () => {
  it('anchors a moving store without an operator, and publishes each anchor', async () => {
    const before = (await latestAnchorId(pool)) ?? 0;
    const stream = `anchor-periodic-${randomUUID()}`;
    await append(pool, stream, 'no-stream', [newEvent('E0', { i: 0 }, { producer: 'anchor-test' })]);
    const ac = new AbortController();
    const logs: string[] = [];
    const running = runPeriodicAnchor(pool, { intervalMs: 200, signal: ac.signal, log: (m) => logs.push(m) });
    try {
      // An anchor of every stream that covers the new one at its version.
      const id = await waitUntil(
        async () => {
          const id = (await latestAnchorId(pool)) ?? 0;
          if (id <= before) return false;
          const check = await verifyAnchor(pool, { anchorId: id, streamId: stream, key: '' });
          // Published too: the runner logs an anchor once it is on Kafka.
          const logged = logs.some((l) => l.startsWith(`audit anchor ${id}: `));
          return check.ok && check.streams === 1 && check.anchor!.streamPrefix === null && logged && id;
        },
        { what: 'a periodic anchor covering the new stream', timeoutMs: 60_000, intervalMs: 200 },
      );
      const published = await readPublishedAnchors();
      expect(published.some((a) => a.anchorId === id)).toBe(true);
    } finally {
      ac.abort();
      await running;
    }
  });
});
