// PostgreSQL over TLS in libpq's URL terms (sslmode=verify-full, sslrootcert, sslcert, sslkey),
// against a real server of the test's own that accepts TLS connections only (hostssl; the owner
// role by client certificate, the application's by password): rods' pools and the migration
// runner connect through it, and each way a connection must fail fails before a password is sent.
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type PrivatePostgres, startPrivatePostgres } from '../../test/support/store/private-postgres.js';
import { type Pem, TestPki } from '../../test/support/tls/certs.js';
import { createPool } from './db.js';
import { migrate, migrationNames } from './migrate.js';

const pki = new TestPki();
let ca: Pem;
let otherCa: Pem;
let owner: Pem;
let pg: PrivatePostgres;

beforeAll(async () => {
  ca = pki.ca('ca');
  otherCa = pki.ca('other-ca');
  const server = pki.leaf('server', ca, ['localhost']); // no IP address: 127.0.0.1 is the wrong name
  owner = pki.leaf('rods_owner', ca, ['rods_owner']); // CN = the role it logs in as
  pg = await startPrivatePostgres({
    tls: { certPath: server.certPath, keyPath: server.keyPath, caPath: ca.certPath },
    hba: [
      'hostssl all rods_owner 127.0.0.1/32 cert',
      'hostssl all rods_owner ::1/128 cert',
      'hostssl all rods 127.0.0.1/32 scram-sha-256',
      'hostssl all rods ::1/128 scram-sha-256',
    ],
  });
  await pg.sql("create role rods_owner login; create role rods login password 'app-secret'");
  await pg.sql('create database rods owner rods_owner');
}, 120_000);

afterAll(async () => {
  await pg?.stop();
  pki.cleanup();
});

const url = (user: string, params: Record<string, string>, host = 'localhost') => {
  const u = new URL(`postgres://${user}@${host}:${pg.port}/rods`);
  if (user === 'rods') u.password = 'app-secret';
  for (const [k, v] of Object.entries(params)) u.searchParams.set(k, v);
  return u.toString();
};

async function sslOf(connectionString: string): Promise<{ ssl: boolean; user: string }> {
  const pool = createPool({ connectionString, max: 1 });
  try {
    const r = await pool.query<{ ssl: boolean; user: string }>(
      'select ssl, current_user as user from pg_stat_ssl where pid = pg_backend_pid()',
    );
    return r.rows[0]!;
  } finally {
    await pool.end();
  }
}

describe('PostgreSQL with sslmode=verify-full', () => {
  it('migrates as the owner by client certificate and serves the application by password, both over TLS', async () => {
    const ownerUrl = url('rods_owner', {
      sslmode: 'verify-full',
      sslrootcert: ca.certPath,
      sslcert: owner.certPath,
      sslkey: owner.keyPath,
    });
    const r = await migrate({ databaseUrl: ownerUrl, appRole: 'rods' });
    expect(r.applied).toHaveLength(migrationNames().length);
    expect(await sslOf(ownerUrl)).toEqual({ ssl: true, user: 'rods_owner' });
    const appUrl = url('rods', { sslmode: 'verify-full', sslrootcert: ca.certPath });
    expect(await sslOf(appUrl)).toEqual({ ssl: true, user: 'rods' });
    // The application's role reads what the owner's migrations made.
    const pool = createPool({ connectionString: appUrl, max: 1 });
    try {
      expect((await pool.query('select count(*)::int as n from events')).rows[0]).toEqual({ n: 0 });
    } finally {
      await pool.end();
    }
  });

  it('refuses a server whose certificate another CA signed, or that does not carry the host name', async () => {
    await expect(
      sslOf(url('rods', { sslmode: 'verify-full', sslrootcert: otherCa.certPath })),
    ).rejects.toThrow(/certificate/i);
    await expect(
      sslOf(url('rods', { sslmode: 'verify-full', sslrootcert: ca.certPath }, '127.0.0.1')),
    ).rejects.toThrow(/does not match|altnames/i);
  });

  it('is refused by the server without TLS, and the owner without its certificate', async () => {
    await expect(sslOf(url('rods', { sslmode: 'disable' }))).rejects.toThrow(/no encryption/);
    await expect(
      sslOf(url('rods_owner', { sslmode: 'verify-full', sslrootcert: ca.certPath })),
    ).rejects.toThrow(/certificate/i);
  });

  it('refuses, naming the file, a CA path that cannot be read', async () => {
    await expect(
      sslOf(url('rods', { sslmode: 'verify-full', sslrootcert: path.join(pki.dir, 'none.crt') })),
    ).rejects.toThrow(/none\.crt/);
  });
});
