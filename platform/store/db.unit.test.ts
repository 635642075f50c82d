// What counts as a lost connection, and the retry around it (no database needed).
import type pg from 'pg';
import { describe, expect, it } from 'vitest';
import { isConnectionError, retryOnConnectionLoss } from './db.js';

const err = (message: string, code?: string) => Object.assign(new Error(message), code ? { code } : {});

describe('isConnectionError', () => {
  it('recognises a lost or refused connection', () => {
    expect(isConnectionError(err('terminating connection due to administrator command', '57P01'))).toBe(true);
    expect(isConnectionError(err('the database system is starting up', '57P03'))).toBe(true);
    expect(isConnectionError(err('connect ECONNREFUSED 127.0.0.1:5432', 'ECONNREFUSED'))).toBe(true);
    expect(isConnectionError(err('Connection terminated unexpectedly'))).toBe(true);
    expect(isConnectionError(err('timeout exceeded when trying to connect'))).toBe(true);
    expect(isConnectionError(err('connection failure', '08006'))).toBe(true);
    expect(isConnectionError(new Error('wrapped', { cause: err('x', 'ECONNRESET') }))).toBe(true);
    expect(isConnectionError(new AggregateError([err('x', 'ECONNREFUSED')]))).toBe(true);
  });

  it('leaves errors of the statement alone', () => {
    expect(isConnectionError(err('duplicate key value violates unique constraint', '23505'))).toBe(false);
    expect(isConnectionError(err('invalid byte sequence for encoding "UTF8": 0x00', '22021'))).toBe(false);
    expect(isConnectionError(err('could not serialize access', '40001'))).toBe(false);
    expect(isConnectionError(undefined)).toBe(false);
  });
});

describe('retryOnConnectionLoss', () => {
  const pool = {} as pg.Pool;

  it('retries while the connection is lost and returns the first success', async () => {
    let calls = 0;
    const out = await retryOnConnectionLoss(pool, async () => {
      if (++calls < 3) throw err('Connection terminated unexpectedly');
      return 'ok';
    });
    expect(out).toBe('ok');
    expect(calls).toBe(3);
  });

  it('throws any other error at once', async () => {
    let calls = 0;
    await expect(
      retryOnConnectionLoss(pool, async () => {
        calls++;
        throw err('syntax error', '42601');
      }),
    ).rejects.toThrow('syntax error');
    expect(calls).toBe(1);
  });

  it('stops retrying when asked to', async () => {
    let calls = 0;
    await expect(
      retryOnConnectionLoss(
        pool,
        async () => {
          calls++;
          throw err('x', 'ECONNREFUSED');
        },
        { shouldStop: () => calls >= 2 },
      ),
    ).rejects.toThrow('x');
    expect(calls).toBe(2);
  });
});
