// A batch consumer outlives the crashes kafkajs gives up on: after a crash kafkajs will not
// restart (restart: false), the adapter connects, subscribes and runs again, with backoff, until
// disconnect() is called. Driven through a stand-in for kafkajs's consumer object.
import { EventEmitter } from 'node:events';
import type { Kafka } from 'kafkajs';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { batchConsumer } from './index.js';

const CRASH = 'consumer.crash';

function fakeKafka(opts: { failConnects?: number } = {}) {
  const bus = new EventEmitter();
  let failConnects = opts.failConnects ?? 0;
  const calls = { connect: 0, subscribe: 0, run: 0, disconnect: 0 };
  const consumer = {
    events: { CRASH, GROUP_JOIN: 'consumer.group_join' },
    on: (name: string, listener: (e: unknown) => void) => bus.on(name, listener),
    connect: async () => {
      calls.connect++;
      if (calls.connect > 1 && failConnects-- > 0) throw new Error('connect ECONNREFUSED');
    },
    subscribe: async () => {
      calls.subscribe++;
    },
    run: async () => {
      calls.run++;
    },
    disconnect: async () => {
      calls.disconnect++;
    },
  };
  const kafka = { consumer: () => consumer } as unknown as Kafka;
  const crash = (restart: boolean) =>
    bus.emit(CRASH, {
      payload: { error: new Error('Failed to find group coordinator'), groupId: 'g', restart },
    });
  return { kafka, calls, crash };
}

beforeEach(() => {
  vi.useFakeTimers();
});
afterEach(() => {
  vi.useRealTimers();
});

describe('the kafkajs batch consumer after a crash', () => {
  it('runs again after a crash kafkajs does not restart, and keeps trying while connecting fails', async () => {
    const f = fakeKafka({ failConnects: 2 });
    const c = batchConsumer(f.kafka, { groupId: 'g', topics: ['t'] });
    await c.run(async () => {});
    expect(f.calls.run).toBe(1);
    f.crash(false);
    await vi.advanceTimersByTimeAsync(1000); // first attempt: connect refused
    expect(f.calls.run).toBe(1);
    await vi.advanceTimersByTimeAsync(2000); // second: refused again
    await vi.advanceTimersByTimeAsync(4000); // third: runs
    expect(f.calls.run).toBe(2);
    expect(f.calls.subscribe).toBe(2);
  });

  it('leaves a crash kafkajs restarts itself to kafkajs', async () => {
    const f = fakeKafka();
    const c = batchConsumer(f.kafka, { groupId: 'g', topics: ['t'] });
    await c.run(async () => {});
    f.crash(true);
    await vi.advanceTimersByTimeAsync(60_000);
    expect(f.calls.run).toBe(1);
  });

  it('stays stopped once disconnected', async () => {
    const f = fakeKafka();
    const c = batchConsumer(f.kafka, { groupId: 'g', topics: ['t'] });
    await c.run(async () => {});
    await c.disconnect();
    f.crash(false);
    await vi.advanceTimersByTimeAsync(60_000);
    expect(f.calls.run).toBe(1);
  });
});
