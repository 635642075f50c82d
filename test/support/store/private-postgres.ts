// A PostgreSQL server of one test's own (initdb into a temporary folder, on a free loopback
// port), for what the shared stack's server cannot be bent to: TLS with certificates the test
// makes, pg_hba rules of its own. The superuser is reached over the server's own socket.
import { chmodSync, copyFileSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { ensureTraversable, pgBinDir, serverAccount } from '../../../infra/stack/postgres.js';
import { run } from '../../../infra/stack/proc.js';
import { createClient } from '../../../platform/store/db.js';
import { freePort } from '../../../platform/util/free-port.js';

export interface PrivatePostgres {
  port: number;
  /** Runs SQL as the superuser (over the socket) in the given database. */
  sql(text: string, database?: string): Promise<void>;
  stop(): Promise<void>;
}

export async function startPrivatePostgres(opts: {
  /** Server certificate and key (PEM files); ssl=on with them. */
  tls?: { certPath: string; keyPath: string; caPath?: string };
  /** pg_hba.conf lines after the superuser's `local` one. */
  hba: string[];
}): Promise<PrivatePostgres> {
  const bin = pgBinDir();
  if (!bin) throw new Error('PostgreSQL server binaries not found (initdb, pg_ctl)');
  const dir = mkdtempSync(path.join(tmpdir(), 'rods-pg-'));
  const data = path.join(dir, 'data');
  const port = await freePort();
  const acct = await serverAccount();
  const ids = acct ? { uid: acct.uid, gid: acct.gid } : {};
  if (acct) {
    ensureTraversable(dir);
    chmodSync(dir, 0o755);
    await run('chown', [`${acct.uid}:${acct.gid}`, dir]);
  }
  await run(
    path.join(bin, 'initdb'),
    ['-D', data, '-U', 'postgres', '--auth-local=trust', '-E', 'UTF8'],
    ids,
  );
  const conf: string[] = [
    `listen_addresses = '127.0.0.1'`,
    `port = ${port}`,
    `unix_socket_directories = '${dir}'`,
  ];
  if (opts.tls) {
    // The server reads its key only when the key file is its own and private.
    for (const [from, to] of [
      [opts.tls.certPath, 'server.crt'],
      [opts.tls.keyPath, 'server.key'],
      ...(opts.tls.caPath ? [[opts.tls.caPath, 'ca.crt']] : []),
    ] as [string, string][]) {
      copyFileSync(from, path.join(data, to));
      chmodSync(path.join(data, to), 0o600);
      if (acct) await run('chown', [`${acct.uid}:${acct.gid}`, path.join(data, to)]);
    }
    conf.push('ssl = on', `ssl_cert_file = 'server.crt'`, `ssl_key_file = 'server.key'`);
    if (opts.tls.caPath) conf.push(`ssl_ca_file = 'ca.crt'`);
  }
  writeFileSync(path.join(data, 'postgresql.auto.conf'), `${conf.join('\n')}\n`);
  writeFileSync(path.join(data, 'pg_hba.conf'), ['local all postgres trust', ...opts.hba, ''].join('\n'));
  const log = path.join(dir, 'server.log');
  if (acct) {
    writeFileSync(log, '');
    await run('chown', ['-R', `${acct.uid}:${acct.gid}`, data, log]);
  }
  await run(path.join(bin, 'pg_ctl'), ['-D', data, '-l', log, '-w', '-t', '60', 'start'], ids);
  const sql = async (text: string, database = 'postgres') => {
    const c = createClient({ host: dir, port, user: 'postgres', database });
    await c.connect();
    try {
      await c.query(text);
    } finally {
      await c.end();
    }
  };
  return {
    port,
    sql,
    async stop() {
      await run(path.join(bin, 'pg_ctl'), ['-D', data, '-m', 'immediate', 'stop'], ids).catch(() => {});
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
