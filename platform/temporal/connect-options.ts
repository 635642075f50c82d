// How rods reaches Temporal, in Temporal's own configuration: the SDK's envconfig reads
// TEMPORAL_ADDRESS, TEMPORAL_NAMESPACE, TEMPORAL_API_KEY, TEMPORAL_TLS*, TEMPORAL_GRPC_META_* and
// a profile of TEMPORAL_CONFIG_FILE / TEMPORAL_PROFILE (a temporal.toml, as the temporal CLI and
// Temporal Cloud write it), so an operator's existing setup works as it is. rods adds only
// TEMPORAL_API_KEY_FILE (a key mounted as a file, re-read on every call so a rotated key is used
// without a restart) and the local stack's defaults. Nothing here is logged: the options hold the
// API key and the client key.
import { readFileSync } from 'node:fs';
import net from 'node:net';
import { checkServerIdentity, connect as tlsConnect } from 'node:tls';
import { loadClientConfigProfile, toClientOptions } from '@temporalio/envconfig';
import {
  ConfigError,
  DEFAULT_TEMPORAL_ADDRESS,
  DEFAULT_TEMPORAL_NAMESPACE,
  loadEndpoints,
} from '../config/endpoints.js';

export interface TemporalConnectOptions {
  address: string;
  namespace: string;
  /** TLS settings in the SDK's terms; true: TLS with the system's CAs; absent: plaintext. */
  tls?: ReturnType<typeof toClientOptions>['connectionOptions']['tls'];
  /** The API key, or a reader of its file (TEMPORAL_API_KEY_FILE). */
  apiKey?: string | (() => string);
  metadata?: ReturnType<typeof toClientOptions>['connectionOptions']['metadata'];
  /** How the connection is secured, for messages: no secret in it. */
  describe: string;
}

/** Reads the connection settings (throws ConfigError naming the setting at fault). */
export function temporalConnectOptions(env: NodeJS.ProcessEnv = process.env): TemporalConnectOptions {
  // Empty variables count as unset, as everywhere else in rods' configuration.
  const vars = Object.fromEntries(
    Object.entries(env).filter((e): e is [string, string] => typeof e[1] === 'string' && e[1] !== ''),
  );
  let profile: ReturnType<typeof loadClientConfigProfile>;
  try {
    profile = loadClientConfigProfile({
      overrideEnvVars: vars,
      // A rods process has no Temporal config file unless TEMPORAL_CONFIG_FILE names one: the
      // user's ~/.config/temporalio/temporal.toml is the CLI's and may point at another cluster.
      disableFile: !vars.TEMPORAL_CONFIG_FILE,
      configFileStrict: true,
    });
  } catch (e) {
    throw new ConfigError(`Temporal configuration: ${(e as Error).message}`);
  }
  // The address and namespace keep endpoints.ts's checks and the local stack's defaults.
  const endpoints = loadEndpoints({
    ...env,
    TEMPORAL_ADDRESS: profile.address ?? vars.TEMPORAL_ADDRESS ?? DEFAULT_TEMPORAL_ADDRESS,
    TEMPORAL_NAMESPACE: profile.namespace ?? vars.TEMPORAL_NAMESPACE ?? DEFAULT_TEMPORAL_NAMESPACE,
  });
  const keyFile = vars.TEMPORAL_API_KEY_FILE;
  if (keyFile && profile.apiKey !== undefined)
    throw new ConfigError(
      'Temporal configuration: both TEMPORAL_API_KEY_FILE and an API key are set; keep one',
    );
  if (keyFile) readApiKey(keyFile); // refuses an unreadable or empty file now, not at the first call
  let connection: ReturnType<typeof toClientOptions>['connectionOptions'];
  try {
    // A key from a file asks for TLS as an inline key does (toClientOptions turns TLS on for one).
    connection = toClientOptions({
      ...profile,
      apiKey: profile.apiKey ?? (keyFile ? '' : undefined),
    }).connectionOptions;
  } catch (e) {
    throw new ConfigError(`Temporal TLS files: ${(e as Error).message}`);
  }
  const apiKey = keyFile ? () => readApiKey(keyFile) : profile.apiKey;
  const tls = connection.tls ?? undefined;
  const host = endpoints.temporalAddress.replace(/:\d+$/, '').replace(/^\[(.*)\]$/, '$1');
  const serverName = tls && tls !== true ? tls.serverNameOverride : undefined;
  if (tls && !serverName && net.isIP(host) && ipServerNameRefused())
    // grpc-js sends the target's host as the TLS server name, which Node 26 refuses for an IP
    // address; the connection would retry until its deadline with no word of why.
    throw new ConfigError(
      `TEMPORAL_ADDRESS ${endpoints.temporalAddress} is an IP address and this Node (${process.version}) refuses one as a TLS server name: give Temporal's DNS name, or set TEMPORAL_TLS_SERVER_NAME to the name in its certificate`,
    );
  const how =
    tls === undefined || tls === false
      ? 'plaintext'
      : tls === true || !tls.clientCertPair
        ? 'TLS'
        : 'mutual TLS (client certificate)';
  return {
    address: endpoints.temporalAddress,
    namespace: endpoints.temporalNamespace,
    ...(tls !== undefined && tls !== false ? { tls } : {}),
    ...(apiKey !== undefined ? { apiKey } : {}),
    ...(connection.metadata ? { metadata: connection.metadata } : {}),
    describe: `${how}${apiKey !== undefined ? ', API key' : ''}`,
  };
}

/**
 * Why a TLS handshake with Temporal fails (another CA, a name the certificate lacks, a client
 * certificate demanded), or undefined when it succeeds: gRPC only reports a missed deadline.
 */
export async function tlsHandshakeProblem(
  t: TemporalConnectOptions,
  timeoutMs = 5_000,
): Promise<string | undefined> {
  if (!t.tls) return undefined;
  const tls = t.tls === true ? {} : t.tls;
  const port = Number(/:(\d+)$/.exec(t.address)?.[1] ?? 7233);
  const host = t.address.replace(/:\d+$/, '').replace(/^\[(.*)\]$/, '$1');
  const name = tls.serverNameOverride ?? host;
  return new Promise((resolve) => {
    const done = (why: string | undefined) => {
      clearTimeout(timer);
      socket.destroy();
      resolve(why);
    };
    const socket = tlsConnect({
      host,
      port,
      ...(net.isIP(name) ? {} : { servername: name }),
      checkServerIdentity: (_h, cert) => checkServerIdentity(name, cert),
      ALPNProtocols: ['h2'],
      ...(tls.serverRootCACertificate ? { ca: Buffer.from(tls.serverRootCACertificate) } : {}),
      ...(tls.clientCertPair
        ? { cert: Buffer.from(tls.clientCertPair.crt), key: Buffer.from(tls.clientCertPair.key) }
        : {}),
    });
    // TLS 1.3: a server that demands a client certificate says so just after the handshake, as
    // an alert on the first read. So the probe speaks first (HTTP/2's connection preface and an
    // empty SETTINGS frame) and waits for the server's answer: its SETTINGS (all is well), the
    // alert, or the connection closed. No TCP connection (a server down or unreachable) is not a
    // TLS problem: the caller's own error says that, and keeps its unreachable-service message.
    let connected = false;
    socket.once('connect', () => {
      connected = true;
    });
    socket.once('secureConnect', () => {
      socket.write(Buffer.concat([Buffer.from('PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n'), H2_EMPTY_SETTINGS]));
    });
    socket.once('data', () => done(undefined));
    socket.once('end', () => done('the server closed the connection right after the handshake'));
    socket.once('error', (e) => done(connected ? e.message : undefined));
    const timer = setTimeout(
      () => done(connected ? `no TLS handshake in ${timeoutMs / 1000} s` : undefined),
      timeoutMs,
    );
  });
}

/** An HTTP/2 SETTINGS frame with no settings: length 0, type 4, no flags, stream 0. */
const H2_EMPTY_SETTINGS = Buffer.from('000000040000000000', 'hex');

/** Whether this Node refuses an IP address as a TLS server name (Node 20 only warns). */
export function ipServerNameRefused(): boolean {
  const socket = new net.Socket();
  try {
    tlsConnect({ socket, servername: '127.0.0.1' }).destroy();
    return false;
  } catch {
    return true;
  } finally {
    socket.destroy();
  }
}

function readApiKey(file: string): string {
  let key: string;
  try {
    key = readFileSync(file, 'utf8').trim();
  } catch (e) {
    throw new ConfigError(
      `TEMPORAL_API_KEY_FILE: cannot read ${file} (${(e as NodeJS.ErrnoException).code ?? 'error'})`,
    );
  }
  if (!key) throw new ConfigError(`TEMPORAL_API_KEY_FILE: ${file} is empty`);
  return key;
}
