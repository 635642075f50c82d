// HTTPS for the gateway: the certificate and key files (optionally a CA that client certificates
// must chain to), read once to start and polled for changes afterwards. A rotated pair is taken
// for new connections with `server.setSecureContext` while the process and its open connections
// go on; a pair that does not load (half written, key and certificate that do not match, an
// expired certificate) is logged and the one in use kept. No key material is ever logged: only
// the certificate's subject, fingerprint and expiry.
import { X509Certificate } from 'node:crypto';
import { readFileSync, statSync } from 'node:fs';
import type { ServerOptions as HttpsServerOptions } from 'node:https';
import { isIP } from 'node:net';
import { createSecureContext, type SecureContextOptions, type Server as TlsServer } from 'node:tls';
import type { FastifyBaseLogger, FastifyInstance } from 'fastify';

/** The files the gateway serves HTTPS with (`--tls-cert`, `--tls-key`, `--tls-client-ca`). */
export interface GatewayTlsFiles {
  /** PEM certificate (the leaf first, then any intermediates). */
  cert: string;
  /** PEM private key of the certificate. */
  key: string;
  /** PEM CA(s) a client certificate must chain to; clients without one are refused. */
  clientCa?: string;
}

/** How often the files are checked for a change (ms). */
export const DEFAULT_TLS_POLL_MS = 2000;

/** What a loaded pair says about itself (no key material). */
export interface CertificateInfo {
  subject: string;
  /** SHA-256 fingerprint, colon-separated hex (as `openssl x509 -fingerprint -sha256` prints it). */
  fingerprint256: string;
  validTo: string;
}

interface Material {
  options: SecureContextOptions;
  info: CertificateInfo;
}

/** A file the gateway cannot serve with: the message names the file and why, never its content. */
export class TlsConfigError extends Error {
  override name = 'TlsConfigError';
}

function readPem(what: string, file: string): Buffer {
  try {
    return readFileSync(file);
  } catch (e) {
    throw new TlsConfigError(`${what} ${file}: ${(e as NodeJS.ErrnoException).code ?? (e as Error).message}`);
  }
}

/** Reads and checks the files: they load into a TLS context and the certificate has not expired. */
function loadMaterial(files: GatewayTlsFiles, now = Date.now()): Material {
  const cert = readPem('TLS certificate', files.cert);
  const key = readPem('TLS key', files.key);
  const ca = files.clientCa ? readPem('TLS client CA', files.clientCa) : undefined;
  let x509: X509Certificate;
  try {
    x509 = new X509Certificate(cert);
  } catch (e) {
    throw new TlsConfigError(
      `TLS certificate ${files.cert} is not a PEM certificate: ${(e as Error).message}`,
    );
  }
  if (ca) {
    try {
      new X509Certificate(ca);
    } catch (e) {
      throw new TlsConfigError(
        `TLS client CA ${files.clientCa} is not a PEM certificate: ${(e as Error).message}`,
      );
    }
  }
  const options: SecureContextOptions = { cert, key, ...(ca ? { ca } : {}), minVersion: 'TLSv1.2' };
  try {
    // The check OpenSSL makes when it serves: a key that is not the certificate's fails here.
    createSecureContext(options);
  } catch (e) {
    throw new TlsConfigError(
      `TLS certificate ${files.cert} and key ${files.key} do not load: ${(e as Error).message}`,
    );
  }
  if (Date.parse(x509.validTo) <= now)
    throw new TlsConfigError(`TLS certificate ${files.cert} expired on ${x509.validTo}`);
  return {
    options,
    info: {
      subject: x509.subject.replace(/\n/g, ', '),
      fingerprint256: x509.fingerprint256,
      validTo: x509.validTo,
    },
  };
}

/** A stamp of the files that changes whenever one of them is written, replaced or removed. */
function stamp(files: GatewayTlsFiles): string {
  return [files.cert, files.key, files.clientCa]
    .filter((f): f is string => f !== undefined)
    .map((f) => {
      try {
        const s = statSync(f);
        return `${s.ino}:${s.size}:${s.mtimeMs}`;
      } catch {
        return 'missing';
      }
    })
    .join('|');
}

/**
 * The gateway's HTTPS: `httpsOptions` for fastify's `https`, and `attach(app)` that watches the
 * files while the app is up. A change is taken once the files have stood still for one poll (a
 * pair written in two steps is read whole); a reload that fails is logged and the pair in use kept.
 */
export class GatewayTls {
  readonly files: GatewayTlsFiles;
  readonly pollMs: number;
  private current: Material;
  private server?: TlsServer;
  private log?: FastifyBaseLogger;
  private timer?: NodeJS.Timeout;
  private seen: string;
  private changed = false;

  private constructor(files: GatewayTlsFiles, pollMs: number) {
    this.files = files;
    this.pollMs = pollMs;
    this.seen = stamp(files);
    this.current = loadMaterial(files);
  }

  /** Loads the files; a TlsConfigError when they cannot be served with. */
  static load(files: GatewayTlsFiles, opts: { pollMs?: number } = {}): GatewayTls {
    return new GatewayTls(files, opts.pollMs ?? DEFAULT_TLS_POLL_MS);
  }

  /** fastify's `https` option: the pair, and with a client CA, client certificates required. */
  get httpsOptions(): HttpsServerOptions {
    const clientCerts = this.files.clientCa !== undefined;
    return { ...this.current.options, requestCert: clientCerts, rejectUnauthorized: clientCerts };
  }

  /** `https` or `https with client certificates`, as the log says it. */
  get mode(): string {
    return this.files.clientCa ? 'https with client certificates' : 'https';
  }

  /** The certificate in use. */
  get certificate(): CertificateInfo {
    return this.current.info;
  }

  /** Watches the files from the app's start (onReady) to its close; the app's server must be this one's. */
  attach(app: FastifyInstance): void {
    app.addHook('onReady', async () => {
      this.start(app.server as unknown as TlsServer, app.log);
      app.log.info(
        { tls: this.mode, certificate: this.current.info, clientCa: this.files.clientCa },
        `gateway serves ${this.mode} (certificate ${this.files.cert}, checked every ${this.pollMs} ms for rotation)`,
      );
    });
    app.addHook('onClose', async () => this.stop());
  }

  /** Starts polling the files, reloading `server`'s certificate on a change. */
  start(server: TlsServer, log?: FastifyBaseLogger): void {
    this.server = server;
    this.log = log;
    this.stop();
    this.timer = setInterval(() => this.poll(), this.pollMs);
    this.timer.unref();
  }

  stop(): void {
    if (this.timer) clearInterval(this.timer);
    this.timer = undefined;
  }

  private poll(): void {
    const now = stamp(this.files);
    if (now !== this.seen) {
      // Still being written, maybe: wait for a poll that finds the files as they were.
      this.seen = now;
      this.changed = true;
      return;
    }
    if (!this.changed) return;
    this.changed = false;
    this.reload();
  }

  /** Loads the files now; true when the server took a new pair (false: unchanged or refused). */
  reload(): boolean {
    let next: Material;
    try {
      next = loadMaterial(this.files);
    } catch (e) {
      this.log?.warn(
        { tls: this.mode, certificate: this.current.info },
        `gateway TLS files changed but cannot be used, the certificate in use is kept: ${(e as Error).message}`,
      );
      return false;
    }
    const same = (['cert', 'key', 'ca'] as const).every((k) =>
      equalBuffers(next.options[k] as Buffer | undefined, this.current.options[k] as Buffer | undefined),
    );
    if (same) return false;
    this.server?.setSecureContext(next.options);
    const previous = this.current.info;
    this.current = next;
    this.log?.info(
      { tls: this.mode, certificate: next.info, previous: previous.fingerprint256 },
      'gateway TLS certificate reloaded: new connections use it, open ones keep theirs',
    );
    return true;
  }
}

function equalBuffers(a: Buffer | undefined, b: Buffer | undefined): boolean {
  return a === undefined || b === undefined ? a === b : a.equals(b);
}

/** 127.0.0.0/8, ::1 (also as ::ffff:127.x.y.z) or `localhost`. */
export function isLoopbackHost(host: string): boolean {
  const h = host.replace(/^\[(.*)\]$/, '$1').toLowerCase();
  if (h === 'localhost') return true;
  if (isIP(h) === 4) return h.startsWith('127.');
  if (isIP(h) !== 6) return false;
  // The URL parser writes an IPv6 address in its one short form (::ffff:127.0.0.1 as ::ffff:7f00:1).
  const short = new URL(`http://[${h}]/`).hostname;
  return short === '[::1]' || /^\[::ffff:7f[0-9a-f]{2}:/.test(short);
}

/** What `rods gateway` was asked for: the flags and their variables. */
export interface GatewayListenFlags {
  host: string;
  tlsCert?: string;
  tlsKey?: string;
  tlsClientCa?: string;
  insecureHttp?: boolean;
}

/**
 * The files to serve HTTPS with, or undefined for plain HTTP; an Error with one line naming the
 * flags when the combination is refused: half a pair, a client CA without a pair, or plain HTTP on
 * an address beyond loopback without --insecure-http.
 */
export function tlsFilesFor(flags: GatewayListenFlags): GatewayTlsFiles | undefined {
  const { tlsCert, tlsKey, tlsClientCa } = flags;
  if ((tlsCert && !tlsKey) || (!tlsCert && tlsKey))
    throw new TlsConfigError(
      '--tls-cert and --tls-key (RODS_GATEWAY_TLS_CERT, RODS_GATEWAY_TLS_KEY) go together: pass both or neither',
    );
  if (tlsCert && tlsKey)
    return { cert: tlsCert, key: tlsKey, ...(tlsClientCa ? { clientCa: tlsClientCa } : {}) };
  if (tlsClientCa)
    throw new TlsConfigError(
      '--tls-client-ca (RODS_GATEWAY_TLS_CLIENT_CA) needs --tls-cert and --tls-key: client certificates are checked over HTTPS only',
    );
  if (!isLoopbackHost(flags.host) && !flags.insecureHttp)
    throw new TlsConfigError(
      `refusing to serve plain HTTP on ${flags.host} (beyond loopback: bearer tokens would cross the network in clear): pass --tls-cert FILE --tls-key FILE (RODS_GATEWAY_TLS_CERT, RODS_GATEWAY_TLS_KEY), or --insecure-http (RODS_GATEWAY_INSECURE_HTTP=1) behind a proxy that terminates TLS`,
    );
  return undefined;
}
