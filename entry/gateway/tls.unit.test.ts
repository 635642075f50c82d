// The gateway over HTTPS (entry/gateway/tls.ts): a fastify app on 127.0.0.1 served with the same
// GatewayTls the gateway uses, certificates from test/support/tls/certs.ts. It checks who is
// trusted, a certificate rotated under a running server (new connections get it, a keep-alive
// connection opened before goes on, a half-written pair is refused and the old one kept), client
// certificates, the refusal of plain HTTP beyond loopback, and the gateway itself over HTTPS.
import { X509Certificate } from 'node:crypto';
import { copyFileSync, writeFileSync } from 'node:fs';
import { Agent, request } from 'node:https';
import type { AddressInfo } from 'node:net';
import { Writable } from 'node:stream';
import type { TLSSocket } from 'node:tls';
import { Command } from 'commander';
import Fastify, { type FastifyInstance } from 'fastify';
import pino from 'pino';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { type Pem, TestPki } from '../../test/support/tls/certs.js';
import { register } from '../cli/commands/gateway.js';
import { TokenSet } from './auth.js';
import { buildGateway } from './server.js';
import { GatewayTls, type GatewayTlsFiles, isLoopbackHost, TlsConfigError, tlsFilesFor } from './tls.js';

const POLL_MS = 40;
let pki: TestPki;
let ca: Pem;
let otherCa: Pem;
let first: Pem;
let second: Pem;

beforeAll(() => {
  pki = new TestPki();
  ca = pki.ca('ca');
  otherCa = pki.ca('other-ca');
  first = pki.leaf('first', ca, ['localhost', '127.0.0.1']);
  second = pki.leaf('second', ca, ['localhost', '127.0.0.1']);
});
afterAll(() => pki?.cleanup());

const open: FastifyInstance[] = [];
afterEach(async () => {
  for (const app of open.splice(0)) await app.close();
});

/** The files a server reads: copies of `pem`, so a test can rewrite them. */
function serveFiles(name: string, pem: Pem, clientCa?: Pem): GatewayTlsFiles {
  const files = { cert: `${pki.dir}/${name}.serve.crt`, key: `${pki.dir}/${name}.serve.key` };
  copyFileSync(pem.certPath, files.cert);
  copyFileSync(pem.keyPath, files.key);
  return clientCa ? { ...files, clientCa: clientCa.certPath } : files;
}

async function serve(files: GatewayTlsFiles): Promise<{ url: URL; tls: GatewayTls; logs: string[] }> {
  const logs: string[] = [];
  const sink = new Writable({
    write(chunk, _enc, done) {
      logs.push(String(chunk));
      done();
    },
  });
  const tls = GatewayTls.load(files, { pollMs: POLL_MS });
  // A pino logger as the gateway's, into `logs`; typed as the gateway's app (an https server).
  const app = Fastify({
    https: tls.httpsOptions,
    loggerInstance: pino({ level: 'info' }, sink),
  }) as unknown as FastifyInstance;
  tls.attach(app);
  app.get('/ping', async () => ({ pong: true }));
  open.push(app);
  await app.listen({ host: '127.0.0.1', port: 0 });
  const { port } = app.server.address() as AddressInfo;
  return { url: new URL(`https://127.0.0.1:${port}/ping`), tls, logs };
}

interface Answer {
  status: number;
  body: string;
  fingerprint: string;
  reused: boolean;
}

function get(
  url: URL,
  opts: { ca: Pem; agent?: Agent; client?: Pem; path?: string } = { ca },
): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const req = request(
      url,
      {
        path: opts.path ?? url.pathname,
        ca: opts.ca.cert,
        ...(opts.client ? { cert: opts.client.cert, key: opts.client.key } : {}),
        agent: opts.agent ?? false,
      },
      (res) => {
        // Read now: a keep-alive socket leaves the response for the agent's pool at its end.
        const fingerprint = (res.socket as TLSSocket).getPeerCertificate().fingerprint256;
        let body = '';
        res.on('data', (c) => {
          body += c;
        });
        res.on('end', () =>
          resolve({ status: res.statusCode ?? 0, body, fingerprint, reused: req.reusedSocket }),
        );
        res.on('error', reject);
      },
    );
    req.on('error', reject);
    req.end();
  });
}

const fingerprintOf = (pem: Pem) => new X509Certificate(pem.cert).fingerprint256;

async function until(what: string, check: () => Promise<boolean>, ms = 5000): Promise<void> {
  const deadline = Date.now() + ms;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, POLL_MS));
  }
}

describe('the gateway over HTTPS (GatewayTls)', () => {
  it('answers a client that trusts its CA and is refused by one that trusts another CA', async () => {
    const { url } = await serve(serveFiles('trust', first));
    const ok = await get(url, { ca });
    expect(ok.status).toBe(200);
    expect(JSON.parse(ok.body)).toEqual({ pong: true });
    expect(ok.fingerprint).toBe(fingerprintOf(first));
    await expect(get(url, { ca: otherCa })).rejects.toThrow(/certificate|self.signed|verify/i);
  });

  it('takes a rotated certificate for new connections; a keep-alive connection opened before goes on', async () => {
    const files = serveFiles('rotate', first);
    const { url, logs, tls } = await serve(files);
    const agent = new Agent({ keepAlive: true, maxSockets: 1 });
    try {
      const before = await get(url, { ca, agent });
      expect(before.fingerprint).toBe(fingerprintOf(first));

      // Half a rotation: the new certificate beside the old key does not load; the old pair stays.
      writeFileSync(files.cert, second.cert);
      await until('the refused pair to be logged', async () => logs.some((l) => /cannot be used/.test(l)));
      expect(logs.join('')).toMatch(/key values mismatch/);
      expect((await get(url, { ca })).fingerprint).toBe(fingerprintOf(first));
      expect(tls.certificate.fingerprint256).toBe(fingerprintOf(first));

      // The key follows: new connections get the new certificate.
      writeFileSync(files.key, second.key);
      await until(
        'the new certificate',
        async () => (await get(url, { ca })).fingerprint === fingerprintOf(second),
      );
      expect(tls.certificate.fingerprint256).toBe(fingerprintOf(second));
      expect(logs.join('')).toMatch(/certificate reloaded/);

      // The connection opened before the rotation still answers, with the certificate it was opened with.
      const after = await get(url, { ca, agent });
      expect(after.reused).toBe(true);
      expect(after.status).toBe(200);
      expect(after.fingerprint).toBe(fingerprintOf(first));
    } finally {
      agent.destroy();
    }
    // No key material in the log: only subjects, fingerprints, dates and file names.
    const logged = logs.join('');
    expect(logged).not.toMatch(/PRIVATE KEY/);
    for (const pem of [first, second]) {
      const body = pem.key.split('\n').filter((l) => l && !l.startsWith('-----'))[0]!;
      expect(logged).not.toContain(body);
    }
  });

  it('keeps the certificate in use when the new one has expired', async () => {
    const files = serveFiles('expiring', first);
    const { url, logs } = await serve(files);
    const expired = pki.leaf('expired', ca, ['localhost', '127.0.0.1'], { expired: true });
    // Written as a rotation tool would: the key first, the certificate last (moved into place).
    writeFileSync(files.key, expired.key);
    writeFileSync(files.cert, expired.cert);
    await until('the expired pair to be refused', async () => logs.some((l) => /expired on/.test(l)));
    expect((await get(url, { ca })).fingerprint).toBe(fingerprintOf(first));
    expect(() => GatewayTls.load(files)).toThrow(TlsConfigError);
    expect(() => GatewayTls.load(files)).toThrow(/expired on/);
  });

  it('with a client CA, refuses a client without a certificate (or with another CA) and answers one with', async () => {
    const client = pki.leaf('client', ca, ['trainer-1']);
    const stranger = pki.leaf('stranger', otherCa, ['trainer-2']);
    const { url, tls } = await serve(serveFiles('mtls', first, ca));
    expect(tls.mode).toBe('https with client certificates');
    await expect(get(url, { ca })).rejects.toThrow(/certificate|socket hang up|ECONNRESET/i);
    await expect(get(url, { ca, client: stranger })).rejects.toThrow(
      /certificate|unknown ca|socket hang up|ECONNRESET/i,
    );
    const ok = await get(url, { ca, client });
    expect(ok.status).toBe(200);
  });

  it('refuses files it cannot serve with, naming the file', () => {
    expect(() => GatewayTls.load({ cert: `${pki.dir}/none.crt`, key: first.keyPath })).toThrow(
      /TLS certificate .*none\.crt: ENOENT/,
    );
    expect(() => GatewayTls.load({ cert: first.certPath, key: second.keyPath })).toThrow(/do not load/);
    const half = `${pki.dir}/half.crt`;
    writeFileSync(half, first.cert.slice(0, 120));
    expect(() => GatewayTls.load({ cert: half, key: first.keyPath })).toThrow(/not a PEM certificate/);
  });

  it('the gateway built with it serves HTTPS', async () => {
    const tls = GatewayTls.load(serveFiles('gateway', first), { pollMs: POLL_MS });
    const app = buildGateway({
      db: {} as never,
      temporal: {} as never,
      tokens: new TokenSet(['t0ken-for-the-tls-test']),
      taskQueue: 'unused',
      rewardsTopic: 'unused',
      publisher: {} as never,
      tls,
    });
    open.push(app);
    await app.listen({ host: '127.0.0.1', port: 0 });
    const { port } = app.server.address() as AddressInfo;
    const ok = await get(new URL(`https://127.0.0.1:${port}/healthz`), { ca });
    expect(ok.status).toBe(200);
    expect(JSON.parse(ok.body)).toEqual({ ok: true });
    expect(ok.fingerprint).toBe(fingerprintOf(first));
  });
});

describe('plain HTTP beyond loopback', () => {
  it('is refused without TLS unless --insecure-http', () => {
    for (const host of ['0.0.0.0', '::', '10.1.2.3', 'gateway.internal']) {
      expect(() => tlsFilesFor({ host })).toThrow(
        /refusing to serve plain HTTP on .*--tls-cert FILE --tls-key FILE.*--insecure-http/,
      );
      expect(tlsFilesFor({ host, insecureHttp: true })).toBeUndefined();
      expect(tlsFilesFor({ host, tlsCert: 'c.pem', tlsKey: 'k.pem' })).toEqual({
        cert: 'c.pem',
        key: 'k.pem',
      });
    }
    for (const host of ['127.0.0.1', '127.8.9.10', 'localhost', '::1', '[::1]', '::ffff:127.0.0.1'])
      expect(tlsFilesFor({ host })).toBeUndefined();
    expect(() => tlsFilesFor({ host: '127.0.0.1', tlsCert: 'c.pem' })).toThrow(/go together/);
    expect(() => tlsFilesFor({ host: '127.0.0.1', tlsClientCa: 'ca.pem' })).toThrow(/needs --tls-cert/);
  });

  it('isLoopbackHost', () => {
    expect(
      ['127.0.0.1', '127.255.0.1', 'LOCALHOST', '::1', '0:0:0:0:0:0:0:1', '::ffff:127.0.0.2'].map(
        isLoopbackHost,
      ),
    ).toEqual([true, true, true, true, true, true]);
    expect(
      ['0.0.0.0', '::', '128.0.0.1', '::ffff:10.0.0.1', '::ffff:7f:1', 'localhost.example.com', ''].map(
        isLoopbackHost,
      ),
    ).toEqual([false, false, false, false, false, false, false]);
  });

  it('`rods gateway` stops with one line before connecting to anything', async () => {
    const run = async (args: string[]) => {
      const program = new Command('rods').exitOverride();
      register(program);
      return program.parseAsync(['gateway', ...args], { from: 'user' });
    };
    await expect(run(['--host', '0.0.0.0'])).rejects.toThrow(
      /^refusing to serve plain HTTP on 0\.0\.0\.0 .*--tls-cert FILE --tls-key FILE .*--insecure-http/,
    );
    await expect(
      run(['--host', '0.0.0.0', '--tls-cert', `${pki.dir}/none.crt`, '--tls-key', first.keyPath]),
    ).rejects.toThrow(/none\.crt: ENOENT/);
    // Allowed: the command goes on to its next check, the tokens file (absent here).
    await expect(
      run(['--host', '0.0.0.0', '--insecure-http', '--tokens', `${pki.dir}/no-tokens`]),
    ).rejects.toThrow(/no-tokens/);
  });
});
