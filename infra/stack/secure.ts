// The secured local stack (`npm run stack:up -- --secure`): the same services as the plain stack,
// each secured as an organisation's own deployment is, in a folder of its own (.stack/secure):
//
// - Kafka: one SASL_SSL listener for clients (SCRAM-SHA-512), the StandardAuthorizer, and ACLs
//   that let rods' principal (User:rods) use only its topics (`rods.`), groups and transactional
//   ids (`rods`). The broker logs in as User:admin, who creates the topics.
// - PostgreSQL: TLS, `hostssl` rules only (a plaintext TCP connection is refused); rods connects
//   with sslmode=verify-full against the stack's CA.
// - Temporal: the dev server on loopback behind nginx, which terminates TLS and demands a client
//   certificate the stack's CA signed (mutual TLS); the dev server has no TLS of its own.
// - The executor serves HTTPS and demands its bearer token; the gateway's certificate is made here too.
//
// Certificates (a CA, a server certificate for `localhost` and the names in
// RODS_STACK_TLS_NAMES, a client certificate for Temporal) and passwords are made at the first
// start under <stack>/secrets (0700; keys and passwords 0600) and kept. `secureStackEnv` is the
// environment that points every rods process at it; `env.sh` in the folder exports it.
import { execFileSync } from 'node:child_process';
import { randomBytes, X509Certificate } from 'node:crypto';
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { isIP, connect as tcpConnect } from 'node:net';
import path from 'node:path';
import { connect as tlsConnect } from 'node:tls';
import { STACK_OWNER_ROLE } from '../../platform/config/endpoints.js';
import { secretFile } from '../../platform/config/stack-dir.js';
import { type Pem, Pki } from './pki.js';

/** Whether the stack manager runs the secured stack (set by `stack:up --secure`). */
export function isSecureStack(env: NodeJS.ProcessEnv = process.env): boolean {
  return env.RODS_STACK_SECURE === '1';
}

/** The principal the broker logs in as (a super user; creates the topics, grants the ACLs). */
export const KAFKA_ADMIN = 'admin';
/** rods' own principal: only its topics, groups and transactional ids. */
export const KAFKA_RODS = 'rods';

export interface SecureFiles {
  dir: string;
  ca: string;
  /** Server certificate and key (Kafka, PostgreSQL, nginx for Temporal, the gateway). */
  serverCert: string;
  serverKey: string;
  /** Kafka's keystore: the server key and certificate in one PEM file. */
  kafkaKeystore: string;
  /** rods' client certificate for Temporal's mutual TLS. */
  clientCert: string;
  clientKey: string;
  /** Kafka client properties of rods' principal and of the admin. */
  kafkaRodsProperties: string;
  kafkaAdminProperties: string;
  /** The SCRAM passwords, one `password=` file each (read by Kafka's FileConfigProvider). */
  kafkaPassword: (user: string) => string;
  executorToken: string;
}

/** The stack's TLS and credential files under `<stackDir>/secrets` (not made here). */
export function secureFiles(stackDir: string): SecureFiles {
  const dir = path.join(stackDir, 'secrets');
  const tls = path.join(dir, 'tls');
  return {
    dir,
    ca: path.join(tls, 'ca.crt'),
    serverCert: path.join(tls, 'server.crt'),
    serverKey: path.join(tls, 'server.key'),
    kafkaKeystore: path.join(tls, 'kafka-keystore.pem'),
    clientCert: path.join(tls, 'rods-client.crt'),
    clientKey: path.join(tls, 'rods-client.key'),
    kafkaRodsProperties: path.join(dir, 'kafka-rods.properties'),
    kafkaAdminProperties: path.join(dir, 'kafka-admin.properties'),
    kafkaPassword: (user) => path.join(dir, `kafka-${user}.password`),
    executorToken: path.join(dir, 'executor.token'),
  };
}

/** The names the server certificate carries: localhost, 127.0.0.1 and RODS_STACK_TLS_NAMES. */
export function serverNames(env: NodeJS.ProcessEnv = process.env): string[] {
  const extra = (env.RODS_STACK_TLS_NAMES ?? '')
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean);
  return [...new Set(['localhost', '127.0.0.1', ...extra])];
}

const secret = (file: string, make: () => string): string => {
  if (!existsSync(file)) writeFileSync(file, make(), { mode: 0o600 });
  return readFileSync(file, 'utf8');
};

/**
 * Makes what is missing of the stack's certificates and credentials (idempotent). A server
 * certificate that lacks one of the names asked for is made again (rotation: `rotate: true`
 * makes new server certificates whatever they carry).
 */
export function ensureSecureFiles(
  stackDir: string,
  opts: { names?: string[]; rotate?: boolean } = {},
): SecureFiles {
  const f = secureFiles(stackDir);
  mkdirSync(f.dir, { recursive: true, mode: 0o700 });
  // Ten years: a local stack's certificates must not expire under a long campaign.
  const pki = new Pki(path.dirname(f.ca), 3650);
  const ca: Pem = pki.existing('ca') ?? pki.ca('ca');
  const names = opts.names ?? serverNames();
  const have = pki.existing('server');
  if (opts.rotate || !have || !names.every((n) => certCarries(have.certPath, n))) {
    const s = pki.leaf('server', ca, names);
    writeFileSync(f.kafkaKeystore, `${s.key}${s.cert}`, { mode: 0o600 });
  }
  if (!pki.existing('rods-client')) pki.leaf('rods-client', ca, ['rods']);
  const pw = () => randomBytes(24).toString('base64url');
  for (const user of [KAFKA_ADMIN, KAFKA_RODS]) secret(f.kafkaPassword(user), () => `password=${pw()}\n`);
  secret(f.executorToken, () => `${pw()}\n`);
  return f;
}

const certCarries = (certPath: string, name: string): boolean => certNames(certPath).includes(name);

/** The names a certificate carries (its subjectAltName entries). */
export function certNames(certPath: string): string[] {
  // The SAN line as openssl prints it: "DNS:localhost, IP Address:127.0.0.1".
  const out = execFileSync('openssl', ['x509', '-in', certPath, '-noout', '-ext', 'subjectAltName'], {
    encoding: 'utf8',
  });
  return [...out.matchAll(/(?:DNS|IP Address):([^,\s]+)/g)].map((m) => m[1]!);
}

/** A certificate file's SHA-256 fingerprint (colon-separated hex, as `openssl x509 -fingerprint` prints it). */
export function fingerprintOf(certPath: string): string {
  return new X509Certificate(readFileSync(certPath)).fingerprint256;
}

/** PostgreSQL speaks TLS only after its SSLRequest (length 8, code 80877103) is answered 'S'. */
function postgresTlsSocket(host: string, port: number, timeoutMs: number) {
  return new Promise<ReturnType<typeof tcpConnect>>((resolve, reject) => {
    const s = tcpConnect({ host, port }, () => s.write(Buffer.from([0, 0, 0, 8, 0x04, 0xd2, 0x16, 0x2f])));
    s.setTimeout(timeoutMs, () =>
      s.destroy(new Error(`no answer from ${host}:${port} within ${timeoutMs} ms`)),
    );
    s.once('error', reject);
    s.once('data', (b) => {
      if (b[0] === 0x53) resolve(s);
      else {
        s.destroy();
        reject(
          new Error(`${host}:${port} refused TLS (answered ${JSON.stringify(String.fromCharCode(b[0]!))})`),
        );
      }
    });
  });
}

/**
 * The SHA-256 fingerprint of the certificate the TLS server at host:port presents now (after a
 * rotation: whether it reloaded). Only the presented certificate is read, not verified;
 * `clientCert`/`clientKey` for a server that demands one.
 */
export async function servedFingerprint(
  host: string,
  port: number,
  opts: { clientCert?: string; clientKey?: string; postgres?: boolean; timeoutMs?: number } = {},
): Promise<string> {
  const timeoutMs = opts.timeoutMs ?? 5000;
  const socket = opts.postgres ? await postgresTlsSocket(host, port, timeoutMs) : undefined;
  return new Promise((resolve, reject) => {
    const s = tlsConnect(
      {
        ...(socket ? { socket } : { host, port }),
        ...(isIP(host) ? {} : { servername: host }),
        rejectUnauthorized: false,
        ...(opts.clientCert
          ? { cert: readFileSync(opts.clientCert), key: readFileSync(opts.clientKey!) }
          : {}),
      },
      () => {
        const fp = s.getPeerCertificate().fingerprint256;
        s.destroy();
        resolve(fp);
      },
    );
    s.setTimeout(timeoutMs, () =>
      s.destroy(new Error(`no TLS handshake with ${host}:${port} within ${timeoutMs} ms`)),
    );
    s.once('error', reject);
  });
}

/**
 * Polls until the server at host:port presents the certificate `expected` (a fingerprint) on
 * `consecutive` new connections in a row. More than one where a server reloads per worker: each of
 * Kafka's network processors has a TLS factory of its own (kafka SocketServer.scala, Processor's
 * `createSelector` registers each channel builder as a Reconfigurable) and takes the new keystore in
 * turn, while the acceptor hands connections to processors round-robin; one new certificate seen
 * says only that one processor reloaded.
 */
export async function untilServing(
  what: string,
  served: () => Promise<string>,
  expected: string,
  opts: { timeoutMs?: number; consecutive?: number } = {},
): Promise<void> {
  const timeoutMs = opts.timeoutMs ?? 30_000;
  const consecutive = opts.consecutive ?? 1;
  const deadline = Date.now() + timeoutMs;
  let last = '';
  let streak = 0;
  for (;;) {
    try {
      last = await served();
    } catch (e) {
      last = (e as Error).message;
    }
    streak = last === expected ? streak + 1 : 0;
    if (streak >= consecutive) return;
    if (Date.now() > deadline)
      throw new Error(
        `${what} still presents ${last} ${timeoutMs / 1000} s after the rotation, not ${expected}` +
          (consecutive > 1 ? ` on ${consecutive} connections in a row` : ''),
      );
    // The next connection at once while the new certificate is seen (another worker may answer it).
    if (streak === 0) await new Promise((r) => setTimeout(r, 250));
  }
}

/** Where the secured stack's services listen (the defaults of `stack:up --secure`). */
export interface SecurePorts {
  kafka: number;
  kafkaController: number;
  postgres: number;
  /** nginx, the TLS terminator clients reach. */
  temporal: number;
  /** The dev server itself, on loopback only. */
  temporalInternal: number;
  executor: number;
}

export const DEFAULT_SECURE_PORTS: SecurePorts = {
  kafka: 9193,
  kafkaController: 9194,
  postgres: 5533,
  temporal: 7333,
  temporalInternal: 7334,
  executor: 8866,
};

/**
 * The environment that points rods (and the stack manager) at the secured stack in `stackDir`,
 * reached by `host` (a name its server certificate carries). Writes rods' and the admin's Kafka
 * client properties, as an operator writes them for Kafka's own tools.
 */
export function secureStackEnv(
  stackDir: string,
  ports: SecurePorts = DEFAULT_SECURE_PORTS,
  host = 'localhost',
): Record<string, string> {
  const f = secureFiles(stackDir);
  for (const [user, file] of [
    [KAFKA_RODS, f.kafkaRodsProperties],
    [KAFKA_ADMIN, f.kafkaAdminProperties],
  ] as const) {
    writeFileSync(
      file,
      [
        '# written by infra/stack/secure.ts for the secured local stack',
        `bootstrap.servers=${host}:${ports.kafka}`,
        'security.protocol=SASL_SSL',
        'sasl.mechanism=SCRAM-SHA-512',
        'config.providers=file',
        'config.providers.file.class=org.apache.kafka.common.config.provider.FileConfigProvider',
        `sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required username="${user}" password="\${file:${f.kafkaPassword(user)}:password}";`,
        'ssl.truststore.type=PEM',
        `ssl.truststore.location=${f.ca}`,
        'ssl.endpoint.identification.algorithm=https',
        '',
      ].join('\n'),
      { mode: 0o600 },
    );
  }
  // The URLs carry the roles' passwords: files (DATABASE_URL_FILE), never the environment.
  const tlsQuery = `sslmode=verify-full&sslrootcert=${encodeURIComponent(f.ca)}`;
  const dbUrl = (role: 'app' | 'owner', user: string) => {
    const pw = secret(secretFile(role, { RODS_STACK_DIR: stackDir }), () =>
      randomBytes(24).toString('base64url'),
    );
    const file = path.join(f.dir, `database-url-${role}`);
    writeFileSync(
      file,
      `postgres://${user}:${encodeURIComponent(pw.trim())}@${host}:${ports.postgres}/rods?${tlsQuery}\n`,
      {
        mode: 0o600,
      },
    );
    return file;
  };
  return {
    RODS_STACK_DIR: stackDir,
    RODS_STACK_SECURE: '1',
    KAFKA_BROKERS: `${host}:${ports.kafka}`,
    KAFKA_CLIENT_PROPERTIES: f.kafkaRodsProperties,
    RODS_KAFKA_CONTROLLER_PORT: String(ports.kafkaController),
    DATABASE_URL_FILE: dbUrl('app', 'rods'),
    RODS_MIGRATE_DATABASE_URL_FILE: dbUrl('owner', STACK_OWNER_ROLE),
    TEMPORAL_ADDRESS: `${host}:${ports.temporal}`,
    TEMPORAL_TLS_SERVER_CA_CERT_PATH: f.ca,
    TEMPORAL_TLS_CLIENT_CERT_PATH: f.clientCert,
    TEMPORAL_TLS_CLIENT_KEY_PATH: f.clientKey,
    RODS_TEMPORAL_INTERNAL_PORT: String(ports.temporalInternal),
    // The Web UI would serve the dev server's API without authentication: headless.
    RODS_TEMPORAL_UI_PORT: '0',
    RODS_TEMPORAL_HTTP_PORT: String(ports.temporalInternal + 1),
    RODS_TEMPORAL_METRICS_PORT: String(ports.temporalInternal + 2),
    // The executor on loopback (beside the worker), over HTTPS and with its token.
    RODS_EXECUTOR_URL: `https://localhost:${ports.executor}`,
    RODS_EXECUTOR_TOKEN_FILE: f.executorToken,
    RODS_EXECUTOR_TLS_CERT: f.serverCert,
    RODS_EXECUTOR_TLS_KEY: f.serverKey,
    RODS_GATEWAY_TLS_CERT: f.serverCert,
    RODS_GATEWAY_TLS_KEY: f.serverKey,
    // Clients of the gateway and the executor: the Python client, and Node (the simulated
    // trainer, the worker), which reads NODE_EXTRA_CA_CERTS when it starts.
    RODS_CA_BUNDLE: f.ca,
    NODE_EXTRA_CA_CERTS: f.ca,
  };
}

/** Settings a rods process may have from another stack that would point it elsewhere. */
export const ANOTHER_STACKS_SETTINGS = [
  'DATABASE_URL',
  'RODS_MIGRATE_DATABASE_URL',
  'KAFKA_CLIENT_PROPERTIES',
  'TEMPORAL_CONFIG_FILE',
  'TEMPORAL_PROFILE',
  'TEMPORAL_API_KEY',
];

/** `export NAME='value'` lines for a shell (values single-quoted). */
export function shellExports(env: Record<string, string>): string {
  return `${Object.entries(env)
    .map(([k, v]) => `export ${k}='${v.replaceAll("'", `'\\''`)}'`)
    .join('\n')}\n`;
}
