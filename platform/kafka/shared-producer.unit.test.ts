import { describe, expect, it } from 'vitest';
import type { KafkaClient, OutgoingRecord, RecordProducer } from './port.js';
import { SharedProducer } from './shared-producer.js';

/** A KafkaClient whose producers record what they were sent; `failNext` makes one send or connect fail. */
function fakeClient() {
  const state = {
    opened: 0,
    disconnected: 0,
    sends: [] as { producer: number; n: number }[],
    failSend: false,
    failConnect: false,
    hangConnect: false,
    hangDisconnect: false,
  };
  const client = {
    async producer(): Promise<RecordProducer> {
      if (state.failConnect) {
        state.failConnect = false;
        throw new Error('connect refused');
      }
      if (state.hangConnect) {
        state.hangConnect = false;
        return new Promise<RecordProducer>(() => {}); // an InitProducerId never answered
      }
      const id = ++state.opened;
      return {
        async send(_topic: string, records: OutgoingRecord[]) {
          if (state.failSend) {
            state.failSend = false;
            throw new Error('broker went away');
          }
          state.sends.push({ producer: id, n: records.length });
          return [];
        },
        async disconnect() {
          state.disconnected++;
          if (state.hangDisconnect) await new Promise(() => {});
        },
      } as unknown as RecordProducer;
    },
  } as unknown as KafkaClient;
  return { client, state };
}

const records = (n: number): OutgoingRecord[] =>
  Array.from({ length: n }, (_, i) => ({ key: `k${i}`, value: 'v' }));

describe('SharedProducer', () => {
  it('opens one producer for many sends and chunks large ones', async () => {
    const { client, state } = fakeClient();
    const p = new SharedProducer(() => client);
    await Promise.all([p.send('t', records(3)), p.send('t', records(5), 2)]);
    await p.send('t', records(1));
    expect(state.opened).toBe(1);
    expect(state.sends.map((s) => s.n).sort()).toEqual([1, 1, 2, 2, 3]);
    await p.close();
    expect(state.disconnected).toBe(1);
    await expect(p.send('t', records(1))).rejects.toThrow(/closed/);
  });

  it('drops a producer whose send failed, so the retry starts from a fresh connection', async () => {
    const { client, state } = fakeClient();
    const p = new SharedProducer(() => client);
    await p.send('t', records(1));
    state.failSend = true;
    await expect(p.send('t', records(1))).rejects.toThrow(/went away/);
    expect(state.disconnected).toBe(1);
    await p.send('t', records(1));
    expect(state.opened).toBe(2);
    expect(state.sends.at(-1)).toEqual({ producer: 2, n: 1 });
  });

  it('does not keep a failed connect', async () => {
    const { client, state } = fakeClient();
    const p = new SharedProducer(() => client);
    state.failConnect = true;
    await expect(p.send('t', records(1))).rejects.toThrow(/refused/);
    await p.send('t', records(1));
    expect(state.opened).toBe(1);
  });

  it('abandons a connect that never finishes, so the next send opens a new producer', async () => {
    const { client, state } = fakeClient();
    const p = new SharedProducer(() => client, undefined, { connectTimeoutMs: 20 });
    state.hangConnect = true;
    await expect(p.send('t', records(1))).rejects.toThrow(/did not connect within 20 ms/);
    await p.send('t', records(2));
    expect(state.opened).toBe(1);
    expect(state.sends).toEqual([{ producer: 1, n: 2 }]);
  });

  it('fails a send even when the failed producer never finishes disconnecting', async () => {
    const { client, state } = fakeClient();
    const p = new SharedProducer(() => client, undefined, { disconnectTimeoutMs: 20 });
    await p.send('t', records(1));
    state.failSend = true;
    state.hangDisconnect = true;
    await expect(p.send('t', records(1))).rejects.toThrow(/went away/);
    state.hangDisconnect = false;
    await p.send('t', records(1));
    expect(state.opened).toBe(2);
  });
});
