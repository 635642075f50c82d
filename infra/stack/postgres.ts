// PostgreSQL 15 from Debian's packages, with a project-local data directory.
// The server refuses to run as root, so when we are root it runs as the `postgres` user.
import {
  chmodSync,
  existsSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  statSync,
  writeFileSync,
} from 'node:fs';
import { userInfo } from 'node:os';
import path from 'node:path';
import { isLoopback, loadEndpoints } from '../../config/endpoints.js';
import { createClient } from '../../store/db.js';
import { paths } from './paths.js';
import { clearPid, isAlive, run, StackError, tail, waitFor, writePid } from './proc.js';
import type { Probe, Service } from './service.js';

const NAME = 'postgres';

function pgBinDir(): string | undefined {
  const override = process.env.RODS_PG_BINDIR;
  if (override) return override;
  const base = '/usr/lib/postgresql';
  if (!existsSync(base)) return undefined;
  const versions = readdirSync(base)
    .filter((v) => existsSync(path.join(base, v, 'bin', 'initdb')))
    .sort((a, b) => Number(b) - Number(a));
  const pick = versions.includes('15') ? '15' : versions[0];
  return pick ? path.join(base, pick, 'bin') : undefined;
}

interface Account {
  uid: number;
  gid: number;
}

async function serverAccount(): Promise<Account | undefined> {
  if (userInfo().uid !== 0) return undefined;
  const { stdout: uid } = await run('id', ['-u', 'postgres']).catch(() => {
    throw new StackError(
      'running as root but there is no `postgres` system user to run the server as; install it with `apt-get install postgresql-15`',
      NAME,
    );
  });
  const { stdout: gid } = await run('id', ['-g', 'postgres']);
  return { uid: Number(uid.trim()), gid: Number(gid.trim()) };
}

/** The server user must be able to reach the data dir: add traverse (o+x) to ancestors that lack it. */
function ensureTraversable(dir: string): void {
  let d = path.dirname(dir);
  while (d !== path.dirname(d)) {
    const mode = statSync(d).mode;
    if ((mode & 0o001) === 0) chmodSync(d, mode | 0o001);
    d = path.dirname(d);
  }
}

export function postgresService(): Service {
  const url = new URL(loadEndpoints().databaseUrl);
  const host = url.hostname || '127.0.0.1';
  const port = Number(url.port || 5432);
  const database = decodeURIComponent(url.pathname.slice(1) || 'rods');
  const user = decodeURIComponent(url.username || 'rods');
  const password = decodeURIComponent(url.password || 'rods');
  const dataDir = path.join(paths.data, 'postgres');
  const socketDir = path.join(paths.run, 'postgres-socket');
  const log = paths.log(NAME);

  const pidFromDataDir = (): number | undefined => {
    const f = path.join(dataDir, 'postmaster.pid');
    if (!existsSync(f)) return undefined;
    // postmaster.pid: line 1 the pid, line 4 the port; a server of ours on another port is not this one.
    const lines = readFileSync(f, 'utf8').split('\n');
    const pid = Number(lines[0]);
    if (Number(lines[3]) !== port) return undefined;
    return Number.isInteger(pid) && pid > 0 && isAlive(pid) ? pid : undefined;
  };

  const asServer = async (acct: Account | undefined) => (acct ? { uid: acct.uid, gid: acct.gid } : {});

  const probe = async (): Promise<Probe> => {
    const client = createClient({ connectionString: url.toString(), connectionTimeoutMillis: 2000 });
    try {
      await client.connect();
      const r = await client.query<{ v: string }>('select version() as v');
      return { answering: true, detail: (r.rows[0]?.v ?? '').split(' on ')[0] ?? 'ok' };
    } catch (e) {
      return { answering: false, detail: (e as Error).message };
    } finally {
      await client.end().catch(() => {});
    }
  };

  return {
    name: NAME,
    endpoint: `${host}:${port}/${database}`,
    managed: isLoopback(host) && process.env.RODS_MANAGE_POSTGRES !== '0',
    port,
    log,
    async install() {
      const bin = pgBinDir();
      if (!bin) {
        throw new StackError(
          'PostgreSQL server binaries (initdb, pg_ctl) not found under /usr/lib/postgresql/*/bin; install them with `apt-get install -y postgresql-15` (or set RODS_PG_BINDIR)',
          NAME,
        );
      }
    },
    pid: pidFromDataDir,
    async start() {
      const bin = pgBinDir()!;
      const acct = await serverAccount();
      const ids = await asServer(acct);
      mkdirSync(socketDir, { recursive: true });
      const fresh = !existsSync(path.join(dataDir, 'PG_VERSION'));
      if (acct) {
        ensureTraversable(dataDir);
        mkdirSync(dataDir, { recursive: true });
        await run('chown', ['-R', `${acct.uid}:${acct.gid}`, dataDir, socketDir]);
        await run('chown', [`${acct.uid}:${acct.gid}`, paths.logs]);
        if (existsSync(log)) await run('chown', [`${acct.uid}:${acct.gid}`, log]);
      }
      if (fresh) {
        const pwfile = path.join(paths.run, 'pg-superuser-pw');
        writeFileSync(pwfile, `${password}\n`, { mode: 0o600 });
        if (acct) await run('chown', [`${acct.uid}:${acct.gid}`, pwfile]);
        await run(
          path.join(bin, 'initdb'),
          [
            '-D',
            dataDir,
            '-U',
            'postgres',
            '--auth-local=trust',
            '--auth-host=scram-sha-256',
            `--pwfile=${pwfile}`,
            '-E',
            'UTF8',
            '--locale=C.UTF-8',
          ],
          ids,
        ).catch((e: Error & { stderr?: string }) => {
          throw new StackError(`initdb failed: ${e.stderr ?? e.message}`, NAME);
        });
      }
      const opts = [
        `-c listen_addresses=${host}`,
        `-c port=${port}`,
        `-c unix_socket_directories=${socketDir}`,
        '-c max_connections=300',
        '-c shared_buffers=512MB',
        '-c max_prepared_transactions=0',
        // Fewer forced checkpoints under bulk appends (local stack; durability settings unchanged).
        '-c max_wal_size=4GB',
        '-c checkpoint_timeout=15min',
        '-c wal_buffers=64MB',
      ].join(' ');
      await run(
        path.join(bin, 'pg_ctl'),
        ['-D', dataDir, '-l', log, '-o', opts, '-w', '-t', '60', 'start'],
        ids,
      ).catch((e: Error & { stdout?: string }) => {
        throw new StackError(`pg_ctl start failed: ${e.stdout ?? e.message}\n${tail(log)}`, NAME);
      });
      const pid = pidFromDataDir();
      if (pid) writePid(NAME, pid);
      // Create the application role and database over the local socket (trust for local only).
      const admin = createClient({ host: socketDir, port, user: 'postgres', database: 'postgres' });
      await admin.connect();
      try {
        const role = await admin.query('select 1 from pg_roles where rolname = $1', [user]);
        if (role.rowCount === 0) {
          await admin.query(
            `create role "${user.replaceAll('"', '""')}" login password '${password.replaceAll("'", "''")}'`,
          );
        }
        const db = await admin.query('select 1 from pg_database where datname = $1', [database]);
        if (db.rowCount === 0) {
          await admin.query(
            `create database "${database.replaceAll('"', '""')}" owner "${user.replaceAll('"', '""')}"`,
          );
        }
      } finally {
        await admin.end();
      }
      await waitFor('postgres', async () => (await probe()).answering, 30_000);
    },
    probe,
    async stop() {
      const pid = pidFromDataDir();
      if (!pid) {
        clearPid(NAME);
        return false;
      }
      const bin = pgBinDir();
      const acct = await serverAccount();
      if (bin) {
        await run(
          path.join(bin, 'pg_ctl'),
          ['-D', dataDir, '-m', 'fast', '-w', '-t', '60', 'stop'],
          await asServer(acct),
        ).catch(() => {});
      }
      clearPid(NAME);
      return true;
    },
  };
}
