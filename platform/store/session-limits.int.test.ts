// Every rods connection carries a statement, lock and idle-in-transaction timeout and TCP
// keepalive (platform/store/db.ts sessionLimits). Before, none did: a half-open client in the middle of a
// transaction held its locks and the relay's snapshot horizon for the ~2 hours TCP takes to notice.
// And a database that answers but cannot take the work (read-only, disk full, a timeout) gives the
// trainer a 503 with Retry-After, not a 500.
import { randomUUID } from 'node:crypto';
import { afterAll, describe, expect, it } from 'vitest';
import { TokenSet } from '../../entry/gateway/auth.js';
import { buildGateway } from '../../entry/gateway/server.js';
import { loadEndpoints } from '../config/endpoints.js';
import { temporalClient } from '../temporal/connect.js';
import { registerCampaign } from './campaigns.js';
import { createPool, isConnectionError, type Pool } from './db.js';

const pools: Pool[] = [];
const pool = (opts: Parameters<typeof createPool>[0]) => {
  const p = createPool(opts);
  pools.push(p);
  return p;
};
afterAll(async () => {
  for (const p of pools) await p.end().catch(() => {});
});

describe('PostgreSQL session limits', () => {
  it('every connection has the statement, lock and idle-in-transaction timeouts', async () => {
    const db = pool({ application: 'rods-limits-test', max: 1 });
    const { rows } = await db.query<{ s: string; l: string; i: string }>(
      `select current_setting('statement_timeout') as s, current_setting('lock_timeout') as l,
              current_setting('idle_in_transaction_session_timeout') as i`,
    );
    expect(rows[0]).toEqual({ s: '2min', l: '30s', i: '1min' });
  });

  it('a session idle inside its transaction is ended by the server and its lock released', async () => {
    const db = pool({ application: 'rods-limits-test', max: 2, limits: { idleInTransactionTimeoutMs: 500 } });
    const key = `limits-test-${randomUUID()}`;
    const holder = await db.connect();
    await holder.query('begin');
    await holder.query('select pg_advisory_xact_lock(hashtextextended($1, 0))', [key]);
    // The holder goes quiet (a frozen or half-open client): the server ends its session.
    await new Promise((r) => setTimeout(r, 1500));
    const err = await holder.query('select 1').catch((e: unknown) => e);
    expect(isConnectionError(err) || /idle-in-transaction|terminating connection/i.test(String(err))).toBe(
      true,
    );
    holder.release(true);
    // Another session takes the lock at once.
    const other = pool({ application: 'rods-limits-test', max: 1, limits: { lockTimeoutMs: 2000 } });
    const { rows } = await other.query<{ got: boolean }>(
      'select pg_try_advisory_lock(hashtextextended($1, 0)) as got',
      [key],
    );
    expect(rows[0]?.got).toBe(true);
  });

  it('a lock wait past lock_timeout fails fast instead of hanging', async () => {
    const db = pool({ application: 'rods-limits-test', max: 2, limits: { lockTimeoutMs: 300 } });
    const key = `limits-test-${randomUUID()}`;
    const a = await db.connect();
    const b = await db.connect();
    try {
      await a.query('begin');
      await a.query('select pg_advisory_xact_lock(hashtextextended($1, 0))', [key]);
      await b.query('begin');
      const err = (await b
        .query('select pg_advisory_xact_lock(hashtextextended($1, 0))', [key])
        .catch((e) => e)) as {
        code?: string;
      };
      expect(err.code).toBe('55P03');
    } finally {
      await a.query('rollback').catch(() => {});
      await b.query('rollback').catch(() => {});
      a.release();
      b.release();
    }
  });

  it('the gateway answers 503 with Retry-After when the database is read-only', async () => {
    const campaignId = `ro-${randomUUID().slice(0, 8)}`;
    const writer = pool({ application: 'rods-limits-test', max: 1 });
    await registerCampaign(writer, { campaignId, config: { ingestion: { unknownTasks: 'accept' } } });
    // Every session of this pool starts read-only (as on a standby, or with the disk full).
    const url = new URL(loadEndpoints().databaseUrl);
    url.searchParams.set('options', '-c default_transaction_read_only=on');
    const readOnly = pool({ application: 'rods-limits-test', max: 2, connectionString: url.toString() });
    expect(
      (await readOnly.query<{ v: string }>("select current_setting('default_transaction_read_only') as v"))
        .rows[0]?.v,
    ).toBe('on');
    const { client, close } = await temporalClient();
    const token = `tok-${randomUUID()}`;
    const app = buildGateway({
      db: readOnly,
      temporal: client,
      tokens: new TokenSet([token]),
      taskQueue: 'unused',
    });
    try {
      const res = await app.inject({
        method: 'POST',
        url: `/v1/campaigns/${campaignId}/steps/1/rollouts`,
        headers: { authorization: `Bearer ${token}` },
        payload: { batchId: 'b1', policyVersion: 'p', groups: [{ taskId: 't', rewards: [0.5] }] },
      });
      expect(res.statusCode, res.body).toBe(503);

      expect(res.headers['retry-after']).toBe('5');
      expect(res.json()).toMatchObject({ type: 'urn:rods:problem:database-unavailable' });
      expect(res.json().detail).toContain('25006');
    } finally {
      await app.close();
      await close();
    }
  });
});
