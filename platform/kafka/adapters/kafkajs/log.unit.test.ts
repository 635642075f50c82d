// kafkajs's log lines: the errors a fresh or busy broker answers while a coordinator loads (they
// pass by themselves) go to the transient handler (`rods doctor`'s progress lines) or become
// warnings; every other error is printed as an error.
import { createRequire } from 'node:module';
import { logLevel } from 'kafkajs';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { freePort } from '../../../util/free-port.js';
import type { ClientLogNote } from '../../port.js';
import { kafkajsClient } from './index.js';
import { routedLogCreator, setTransientLog, TRANSIENT_ERRORS } from './log.js';

const log = routedLogCreator(logLevel.ERROR);
const entry = (message: string, extra: Record<string, unknown> = {}, level = logLevel.ERROR) => ({
  namespace: 'Connection',
  level,
  label: level === logLevel.ERROR ? 'ERROR' : 'WARN',
  log: { timestamp: 'now', message, ...extra },
});

afterEach(() => {
  setTransientLog(undefined);
  vi.restoreAllMocks();
});

describe('kafkajs log routing', () => {
  it('names only errors kafkajs really raises (its own message table and errors)', () => {
    const require = createRequire(import.meta.url);
    const table = require('kafkajs/src/protocol/error.js').errorCodes as { message: string }[];
    const messages = new Set(table.map((e) => e.message));
    for (const m of Object.keys(TRANSIENT_ERRORS)) {
      if (m === 'Failed to find group coordinator') continue; // KafkaJSGroupCoordinatorNotFound's message
      expect(messages, m).toContain(m);
    }
  });

  it('a coordinator still loading goes to the handler, not to the error log', () => {
    const notes: ClientLogNote[] = [];
    setTransientLog((n) => notes.push(n));
    const error = vi.spyOn(console, 'error').mockImplementation(() => {});
    const warn = vi.spyOn(console, 'warn').mockImplementation(() => {});
    log(
      entry('Response FindCoordinator(key: 10, version: 2)', {
        broker: '127.0.0.1:9092',
        error: 'The group coordinator is not available',
      }),
    );
    log(
      entry('Response JoinGroup(key: 11, version: 5)', {
        error: "The coordinator is loading and hence can't process requests for this group",
      }),
    );
    expect(notes.map((n) => n.what)).toEqual([
      'the group coordinator is not available yet',
      'the group coordinator is loading',
    ]);
    expect(notes[0]).toMatchObject({
      broker: '127.0.0.1:9092',
      detail: '[Connection] Response FindCoordinator(key: 10, version: 2)',
    });
    expect(error).not.toHaveBeenCalled();
    expect(warn).not.toHaveBeenCalled();
  });

  it('a consumer restarting after such a crash is progress too; after another crash it is an error', () => {
    const notes: string[] = [];
    setTransientLog((n) => notes.push(n.what));
    const error = vi.spyOn(console, 'error').mockImplementation(() => {});
    log({
      ...entry('Crash: KafkaJSGroupCoordinatorNotFound: Failed to find group coordinator'),
      namespace: 'Consumer',
    });
    log({ ...entry('Restarting the consumer in 300ms'), namespace: 'Consumer' });
    expect(notes).toEqual([
      'the group coordinator is not available yet',
      'the consumer restarts after a transient error',
    ]);
    expect(error).not.toHaveBeenCalled();
    log({ ...entry('Crash: KafkaJSProtocolError: Not authorized to access group'), namespace: 'Consumer' });
    log({ ...entry('Restarting the consumer in 300ms'), namespace: 'Consumer' });
    expect(error).toHaveBeenCalledTimes(2);
    expect(notes).toHaveLength(2);
  });

  it('without a handler a transient error is a WARN line; a real failure stays an ERROR line', () => {
    const error = vi.spyOn(console, 'error').mockImplementation(() => {});
    const warn = vi.spyOn(console, 'warn').mockImplementation(() => {});
    log(
      entry('Response FindCoordinator(key: 10, version: 2)', {
        error: 'The group coordinator is not available',
      }),
    );
    expect(JSON.parse(warn.mock.calls[0]![0] as string)).toMatchObject({
      level: 'WARN',
      transient: 'the group coordinator is not available yet',
      message: '[Connection] Response FindCoordinator(key: 10, version: 2)',
    });
    setTransientLog(() => {
      throw new Error('a real failure is not transient');
    });
    log(entry('Connection error: connect ECONNREFUSED 127.0.0.1:9', { broker: '127.0.0.1:9' }));
    expect(JSON.parse(error.mock.calls[0]![0] as string)).toMatchObject({
      level: 'ERROR',
      message: '[Connection] Connection error: connect ECONNREFUSED 127.0.0.1:9',
      broker: '127.0.0.1:9',
    });
  });

  it('the adapter logs through it: a refused broker is an ERROR line on stderr', async () => {
    const lines: string[] = [];
    vi.spyOn(console, 'error').mockImplementation((l: string) => lines.push(l));
    const k = kafkajsClient({ brokers: [`127.0.0.1:${await freePort()}`], retries: 0 });
    await expect(k.admin()).rejects.toThrow(/ECONNREFUSED/);
    expect(lines.length).toBeGreaterThan(0);
    expect(JSON.parse(lines[0]!)).toMatchObject({
      level: 'ERROR',
      message: expect.stringMatching(/ECONNREFUSED/),
    });
  });
});
