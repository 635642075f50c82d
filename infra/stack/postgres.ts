// PostgreSQL 15 from Debian's packages, with a project-local data directory.
// The server refuses to run as root, so when we are root it runs as the `postgres` user.
//
// Credentials: three roles with a random password each, kept in .stack/secrets (files 0600,
// folder 0700): the application's role (DATABASE_URL's user, `rods`), the owner of the database
// and its tables that runs the migrations (`rods_owner`), and the superuser `postgres`. Every
// connection, the local socket's too, authenticates with scram-sha-256; the socket folder is 0700.
// A data directory from before (trusted socket, `rods`/`rods` owning everything) is upgraded in
// place on start: passwords rotated, ownership moved to the owner role, grants applied.
import { randomBytes } from 'node:crypto';
import {
  chmodSync,
  existsSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  rmSync,
  statSync,
  writeFileSync,
} from 'node:fs';
import { userInfo } from 'node:os';
import path from 'node:path';
import { loadEndpoints, readStackSecret, STACK_OWNER_ROLE } from '../../platform/config/endpoints.js';
import { createClient } from '../../platform/store/db.js';
import { grantAppRole } from '../../platform/store/migrate.js';
import { paths, type StackSecret, secretFile } from './paths.js';
import { clearPid, isAlive, run, StackError, tail, waitFor, writePid } from './proc.js';
import { fingerprintOf, isSecureStack, secureFiles, servedFingerprint, untilServing } from './secure.js';
import { manages, type Probe, type Service } from './service.js';

const NAME = 'postgres';

export function pgBinDir(): string | undefined {
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

export interface Account {
  uid: number;
  gid: number;
}

export async function serverAccount(): Promise<Account | undefined> {
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
export function ensureTraversable(dir: string): void {
  let d = path.dirname(dir);
  while (d !== path.dirname(d)) {
    const mode = statSync(d).mode;
    if ((mode & 0o001) === 0) chmodSync(d, mode | 0o001);
    d = path.dirname(d);
  }
}

/**
 * The secured stack's server: its certificate and key from the stack's secrets (copied into the
 * data directory at every start, so a rotated certificate is taken at the next), and
 * authentication rules that take TCP connections over TLS only (`hostssl`), with a password.
 */
async function secureServer(dataDir: string, acct: Account | undefined): Promise<void> {
  const f = secureFiles(paths.stack);
  for (const [from, to] of [
    [f.serverCert, 'server.crt'],
    [f.serverKey, 'server.key'],
  ] as const) {
    const dest = path.join(dataDir, to);
    writeFileSync(dest, readFileSync(from), { mode: 0o600 });
    chmodSync(dest, 0o600); // the server reads its key only when it is private to it
    if (acct) await run('chown', [`${acct.uid}:${acct.gid}`, dest]);
  }
  writeFileSync(
    path.join(dataDir, 'pg_hba.conf'),
    [
      '# written by infra/stack/postgres.ts for the secured stack: TLS-only TCP, passwords everywhere',
      'local all all scram-sha-256',
      'hostssl all all 0.0.0.0/0 scram-sha-256',
      'hostssl all all ::/0 scram-sha-256',
      '',
    ].join('\n'),
  );
}

/** A stack password: read from its file, or made (random) and written 0600 on first use. */
export function ensureStackSecret(name: StackSecret): string {
  const have = readStackSecret(name);
  if (have !== undefined) return have;
  const file = secretFile(name);
  mkdirSync(path.dirname(file), { recursive: true, mode: 0o700 });
  chmodSync(path.dirname(file), 0o700);
  const pw = randomBytes(24).toString('base64url');
  try {
    writeFileSync(file, `${pw}\n`, { mode: 0o600, flag: 'wx' });
  } catch (e) {
    // Another process made it first: theirs counts.
    if ((e as NodeJS.ErrnoException).code === 'EEXIST') return readStackSecret(name) ?? pw;
    throw e;
  }
  return pw;
}

const ident = (s: string) => `"${s.replaceAll('"', '""')}"`;
const literal = (s: string) => `'${s.replaceAll("'", "''")}'`;

/** A role and its password, from an explicit URL or else the stack's secret file. */
function credentials(explicit: string | undefined, defaultUser: string, secret: StackSecret) {
  const env = explicit ? new URL(explicit) : undefined;
  const user = decodeURIComponent(env?.username || '') || defaultUser;
  const password = decodeURIComponent(env?.password || '') || ensureStackSecret(secret);
  return { user, password };
}

/** pg_hba.conf with every `trust` method replaced by scram-sha-256 (comments left alone). */
export function hardenHba(text: string): string {
  return text
    .split('\n')
    .map((line) => (/^\s*#/.test(line) ? line : line.replace(/\btrust\s*$/, 'scram-sha-256')))
    .join('\n');
}

export interface PostgresOptions {
  /** Also upgrade a server that is already running (`stack up`); otherwise only one it starts. */
  upgradeRunning?: boolean;
}

export function postgresService(opts: PostgresOptions = {}): Service {
  const url = new URL(loadEndpoints().databaseUrl);
  const host = url.hostname || '127.0.0.1';
  const port = Number(url.port || 5432);
  const database = decodeURIComponent(url.pathname.slice(1) || 'rods');
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
    // Read now: start() may just have made the password the default URL reads.
    const client = createClient({
      connectionString: loadEndpoints().databaseUrl,
      connectionTimeoutMillis: 2000,
    });
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

  const hba = path.join(dataDir, 'pg_hba.conf');
  /** Still set up as before: a socket anyone local may use without a password. */
  const legacy = () =>
    !existsSync(secretFile('superuser')) ||
    hardenHba(readFileSync(hba, 'utf8')) !== readFileSync(hba, 'utf8');

  // Idempotent: passwords, the server's authentication, roles, database owner, ownership of the
  // tables and the application's grants; upgrades a data directory from before in place.
  const configure = async (): Promise<void> => {
    const app = credentials(process.env.DATABASE_URL || undefined, 'rods', 'app');
    const owner = credentials(process.env.RODS_MIGRATE_DATABASE_URL || undefined, STACK_OWNER_ROLE, 'owner');
    const superuser = ensureStackSecret('superuser');
    if (app.user === owner.user || [app.user, owner.user].includes('postgres'))
      throw new StackError(
        `the application's role (${app.user}) and the owner role (${owner.user}) must be two roles, neither of them postgres`,
        NAME,
      );
    chmodSync(socketDir, 0o700);
    // The file initdb once read the superuser's password from, left behind by older versions.
    rmSync(path.join(paths.run, 'pg-superuser-pw'), { force: true });
    const trusted = readFileSync(hba, 'utf8');
    const hardened = hardenHba(trusted);
    const superClient = (db: string) =>
      createClient({ host: socketDir, port, user: 'postgres', database: db, password: superuser });
    // Roles and database over the local socket. A data dir from before still trusts the socket
    // (any password passes): the superuser's password is set before the trust is removed.
    const admin = superClient('postgres');
    await admin.connect().catch((e: Error) => {
      throw new StackError(
        `cannot log in as postgres over ${socketDir} with the password in ${secretFile('superuser')}: ${e.message}`,
        NAME,
      );
    });
    try {
      await admin.query(`alter role postgres password ${literal(superuser)}`);
      if (hardened !== trusted) {
        writeFileSync(hba, hardened);
        await admin.query('select pg_reload_conf()');
      }
      for (const r of [app, owner]) {
        const have = await admin.query('select 1 from pg_roles where rolname = $1', [r.user]);
        await admin.query(
          `${have.rowCount === 0 ? 'create' : 'alter'} role ${ident(r.user)} login nosuperuser nocreatedb nocreaterole password ${literal(r.password)}`,
        );
      }
      const db = await admin.query<{ owner: string }>(
        'select pg_get_userbyid(datdba) as owner from pg_database where datname = $1',
        [database],
      );
      if (db.rowCount === 0) {
        await admin.query(`create database ${ident(database)} owner ${ident(owner.user)}`);
      } else if (db.rows[0]!.owner !== owner.user) {
        await admin.query(`alter database ${ident(database)} owner to ${ident(owner.user)}`);
      }
    } finally {
      await admin.end();
    }
    // In the database: what the application's role owned (tables of a stack from before) moves
    // to the owner role, and the application's role gets its grants (platform/store/migrate.ts).
    const inDb = superClient(database);
    await inDb.connect();
    try {
      // The lock `rods migrate` holds: concurrent grants on one table would collide.
      await inDb.query("select pg_advisory_lock(hashtextextended('rods-migrate', 0))");
      await inDb.query(`reassign owned by ${ident(app.user)} to ${ident(owner.user)}`);
      await inDb.query(`set role ${ident(owner.user)}`);
      await grantAppRole(inDb, app.user);
    } finally {
      await inDb.end();
    }
  };

  return {
    name: NAME,
    endpoint: `${host}:${port}/${database}`,
    managed: manages(host, NAME),
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
      const superuser = ensureStackSecret('superuser');
      // Only the server's user may reach its socket (local connections need a password too).
      mkdirSync(socketDir, { recursive: true });
      chmodSync(socketDir, 0o700);
      const fresh = !existsSync(path.join(dataDir, 'PG_VERSION'));
      if (acct) {
        ensureTraversable(dataDir);
        mkdirSync(dataDir, { recursive: true });
        await run('chown', ['-R', `${acct.uid}:${acct.gid}`, dataDir, socketDir]);
        await run('chown', [`${acct.uid}:${acct.gid}`, paths.logs]);
        if (existsSync(log)) await run('chown', [`${acct.uid}:${acct.gid}`, log]);
      }
      if (fresh) {
        // initdb reads the superuser's password from a file; it is removed right after.
        const pwfile = path.join(paths.run, `pg-initdb-${randomBytes(6).toString('hex')}`);
        writeFileSync(pwfile, `${superuser}\n`, { mode: 0o600 });
        try {
          if (acct) await run('chown', [`${acct.uid}:${acct.gid}`, pwfile]);
          await run(
            path.join(bin, 'initdb'),
            [
              '-D',
              dataDir,
              '-U',
              'postgres',
              '--auth-local=scram-sha-256',
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
        } finally {
          rmSync(pwfile, { force: true });
        }
      }
      if (isSecureStack()) await secureServer(dataDir, acct);
      const opts = [
        ...(isSecureStack()
          ? ['-c ssl=on', '-c ssl_cert_file=server.crt', '-c ssl_key_file=server.key']
          : []),
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
      await configure();
      await waitFor('postgres', async () => (await probe()).answering, 30_000);
    },
    probe,
    ...(isSecureStack()
      ? {
          async rotate() {
            // PostgreSQL re-reads ssl_cert_file and ssl_key_file on a reload (SIGHUP); sessions
            // already open keep theirs.
            const expected = fingerprintOf(secureFiles(paths.stack).serverCert);
            const bin = pgBinDir();
            if (!pidFromDataDir() || !bin) return 'not running: it serves the new certificate when it starts';
            const acct = await serverAccount();
            await secureServer(dataDir, acct);
            await run(path.join(bin, 'pg_ctl'), ['-D', dataDir, 'reload'], await asServer(acct));
            await untilServing(
              'PostgreSQL',
              () => servedFingerprint(host, port, { postgres: true }),
              expected,
            );
            return `reloaded and presents ${expected.slice(0, 11)}`;
          },
        }
      : {}),
    async ready() {
      if (!existsSync(hba)) return 'not ours (no data directory here)';
      if (opts.upgradeRunning) {
        const was = legacy();
        await configure();
        return was
          ? 'upgraded: own passwords in .stack/secrets, owner role, grants'
          : 'roles and grants checked';
      }
      return legacy()
        ? 'WARNING: still trusts local connections and shares its password; run `npm run stack:up` to upgrade it'
        : 'roles and passwords set';
    },
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
