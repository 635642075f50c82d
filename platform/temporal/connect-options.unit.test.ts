// Temporal connection settings from Temporal's own environment variables and config file, and
// what the client really sends with them: a local HTTP/2 TLS server (answering every gRPC call
// UNIMPLEMENTED, which the SDK's connect check accepts) records each handshake and request.
import { writeFileSync } from 'node:fs';
import http2 from 'node:http2';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import type { TLSSocket } from 'node:tls';
import { Connection } from '@temporalio/client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Pem, TestPki } from '../../test/support/tls/certs.js';
import { ConfigError } from '../config/endpoints.js';
import { ipServerNameRefused, temporalConnectOptions, tlsHandshakeProblem } from './connect-options.js';

const pki = new TestPki();
let ca: Pem;
let otherCa: Pem;
let server: Pem;
let client: Pem;
afterAll(() => pki.cleanup());
beforeAll(() => {
  ca = pki.ca('ca');
  otherCa = pki.ca('other-ca');
  server = pki.leaf('server', ca, ['localhost', '127.0.0.1']);
  client = pki.leaf('client', ca, ['rods-worker']);
});

const file = (name: string, text: string) => {
  const p = path.join(pki.dir, name);
  writeFileSync(p, text);
  return p;
};

describe('settings', () => {
  it("defaults to the local stack's plaintext endpoint", () => {
    const t = temporalConnectOptions({});
    expect(t).toMatchObject({ address: '127.0.0.1:7233', namespace: 'default', describe: 'plaintext' });
    expect(t.tls).toBeUndefined();
    expect(t.apiKey).toBeUndefined();
  });

  it('takes TEMPORAL_TLS_* paths: mutual TLS with the CA, the pair and the server name', () => {
    const t = temporalConnectOptions({
      TEMPORAL_ADDRESS: 'temporal.internal:7233',
      TEMPORAL_NAMESPACE: 'rl',
      TEMPORAL_TLS_SERVER_CA_CERT_PATH: ca.certPath,
      TEMPORAL_TLS_CLIENT_CERT_PATH: client.certPath,
      TEMPORAL_TLS_CLIENT_KEY_PATH: client.keyPath,
      TEMPORAL_TLS_SERVER_NAME: 'temporal.example',
    });
    expect(t.address).toBe('temporal.internal:7233');
    expect(t.namespace).toBe('rl');
    expect(t.describe).toBe('mutual TLS (client certificate)');
    const tls = t.tls as {
      serverNameOverride?: string;
      serverRootCACertificate?: Uint8Array;
      clientCertPair?: { crt: Uint8Array; key: Uint8Array };
    };
    const text = (b?: Uint8Array) => new TextDecoder().decode(b);
    expect(tls.serverNameOverride).toBe('temporal.example');
    expect(text(tls.serverRootCACertificate)).toBe(ca.cert);
    expect(text(tls.clientCertPair?.crt)).toBe(client.cert);
    expect(text(tls.clientCertPair?.key)).toBe(client.key);
  });

  it('an API key turns TLS on, as the SDK does; TEMPORAL_TLS=false turns it off', () => {
    const cloud = { TEMPORAL_ADDRESS: 'ns.acct.tmprl.cloud:7233' };
    expect(temporalConnectOptions({ ...cloud, TEMPORAL_API_KEY: 'k-123' })).toMatchObject({
      tls: true,
      apiKey: 'k-123',
      describe: 'TLS, API key',
    });
    const off = temporalConnectOptions({ ...cloud, TEMPORAL_API_KEY: 'k-123', TEMPORAL_TLS: 'false' });
    expect(off.tls).toBeUndefined();
    expect(off.describe).toBe('plaintext, API key');
  });

  it('reads a profile of TEMPORAL_CONFIG_FILE; the environment overrides it', () => {
    const toml = file(
      'temporal.toml',
      [
        '[profile.default]',
        'address = "default.example:7233"',
        '[profile.cloud]',
        'address = "ns.acct.tmprl.cloud:7233"',
        'namespace = "ns.acct"',
        'api_key = "from-file"',
      ].join('\n'),
    );
    expect(temporalConnectOptions({ TEMPORAL_CONFIG_FILE: toml }).address).toBe('default.example:7233');
    const cloud = temporalConnectOptions({ TEMPORAL_CONFIG_FILE: toml, TEMPORAL_PROFILE: 'cloud' });
    expect(cloud).toMatchObject({ address: 'ns.acct.tmprl.cloud:7233', namespace: 'ns.acct', tls: true });
    expect(
      temporalConnectOptions({
        TEMPORAL_CONFIG_FILE: toml,
        TEMPORAL_PROFILE: 'cloud',
        TEMPORAL_NAMESPACE: 'x',
      }).namespace,
    ).toBe('x');
  });

  it('refuses, by name, a missing profile, an unknown key, a bad address and unreadable files', () => {
    const toml = file('bad.toml', '[profile.default]\naddress = "a:1"\napi_kee = "typo"\n');
    const refusal = (env: NodeJS.ProcessEnv) => {
      try {
        temporalConnectOptions(env);
      } catch (e) {
        expect(e).toBeInstanceOf(ConfigError);
        return (e as Error).message;
      }
      throw new Error('accepted');
    };
    expect(refusal({ TEMPORAL_CONFIG_FILE: toml })).toMatch(/api_kee/);
    expect(
      refusal({ TEMPORAL_CONFIG_FILE: file('ok.toml', '[profile.default]\n'), TEMPORAL_PROFILE: 'prod' }),
    ).toMatch(/'prod' not found/);
    expect(refusal({ TEMPORAL_ADDRESS: 'no-port' })).toMatch(/TEMPORAL_ADDRESS/);
    expect(refusal({ TEMPORAL_TLS_SERVER_CA_CERT_PATH: path.join(pki.dir, 'absent.crt') })).toMatch(
      /absent\.crt/,
    );
    expect(refusal({ TEMPORAL_API_KEY_FILE: path.join(pki.dir, 'absent.key') })).toMatch(
      /TEMPORAL_API_KEY_FILE: cannot read .*absent\.key \(ENOENT\)/,
    );
    expect(refusal({ TEMPORAL_API_KEY_FILE: file('empty.key', '\n') })).toMatch(/is empty/);
    const both = refusal({ TEMPORAL_API_KEY_FILE: file('k1', 'secret-1'), TEMPORAL_API_KEY: 'secret-2' });
    expect(both).toMatch(/keep one/);
    expect(both).not.toMatch(/secret-/);
  });
});

/** A TLS HTTP/2 server answering every gRPC call UNIMPLEMENTED; records what it was sent. */
async function grpcStub(opts: { requestCert?: boolean } = {}) {
  const seen: { authorization?: string; clientCert: boolean; path: string; meta?: string }[] = [];
  const srv = http2.createSecureServer({
    cert: server.cert,
    key: server.key,
    ca: ca.cert,
    requestCert: opts.requestCert ?? false,
    rejectUnauthorized: opts.requestCert ?? false,
    allowHTTP1: false,
  });
  srv.on('stream', (stream, headers) => {
    const sock = stream.session?.socket as TLSSocket | undefined;
    seen.push({
      path: String(headers[':path']),
      authorization: headers.authorization as string | undefined,
      meta: headers['x-team'] as string | undefined,
      clientCert: Boolean(sock?.getPeerCertificate() && Object.keys(sock.getPeerCertificate()).length),
    });
    stream.respond({ ':status': 200, 'content-type': 'application/grpc' }, { waitForTrailers: true });
    stream.on('wantTrailers', () => stream.sendTrailers({ 'grpc-status': '12', 'grpc-message': 'stub' }));
    stream.end();
  });
  await new Promise<void>((r) => srv.listen(0, '127.0.0.1', r));
  const address = `127.0.0.1:${(srv.address() as AddressInfo).port}`;
  return { address, seen, close: () => new Promise<void>((r) => srv.close(() => r())) };
}

async function connect(env: NodeJS.ProcessEnv) {
  const t = temporalConnectOptions(env);
  const c = await Connection.connect({
    address: t.address,
    ...(t.tls ? { tls: t.tls } : {}),
    ...(t.apiKey !== undefined ? { apiKey: t.apiKey } : {}),
    ...(t.metadata ? { metadata: t.metadata } : {}),
    connectTimeout: 5_000,
    // grpc-js sends through the proxy in https_proxy/http_proxy (a CI machine may set one, and an
    // intercepting proxy presents its own certificate): the stub is on loopback, reached directly.
    channelArgs: { 'grpc.enable_http_proxy': 0 },
  });
  return c;
}

describe('what the client sends', () => {
  it("verifies the server against the configured CA and sends the key file's current key", async () => {
    const stub = await grpcStub();
    try {
      const keyFile = file('api.key', 'key-one\n');
      const env = {
        TEMPORAL_ADDRESS: stub.address,
        TEMPORAL_TLS_SERVER_CA_CERT_PATH: ca.certPath,
        TEMPORAL_TLS_SERVER_NAME: 'localhost',
        TEMPORAL_API_KEY_FILE: keyFile,
        TEMPORAL_GRPC_META_X_TEAM: 'rl-infra',
      };
      const c = await connect(env);
      expect(stub.seen.at(-1)).toMatchObject({ authorization: 'Bearer key-one', meta: 'rl-infra' });
      writeFileSync(keyFile, 'key-two\n'); // rotated: the next call carries it
      await c.workflowService.getSystemInfo({}).catch(() => undefined);
      expect(stub.seen.at(-1)?.authorization).toBe('Bearer key-two');
      await c.close();

      // Another CA: the handshake fails, nothing is sent.
      const before = stub.seen.length;
      await expect(connect({ ...env, TEMPORAL_TLS_SERVER_CA_CERT_PATH: otherCa.certPath })).rejects.toThrow();
      // A name the certificate does not carry: refused too.
      await expect(connect({ ...env, TEMPORAL_TLS_SERVER_NAME: 'not-the-server.example' })).rejects.toThrow();
      expect(stub.seen.length).toBe(before);
    } finally {
      await stub.close();
    }
  });

  it('an IP address with TLS and no server name: connects where Node allows it, refused by name where not', async () => {
    const stub = await grpcStub();
    try {
      const env = { TEMPORAL_ADDRESS: stub.address, TEMPORAL_TLS_SERVER_CA_CERT_PATH: ca.certPath };
      if (ipServerNameRefused()) {
        // Node 26: grpc-js would retry until its deadline; rods says why at once.
        expect(() => temporalConnectOptions(env)).toThrow(/is an IP address .* TEMPORAL_TLS_SERVER_NAME/);
        expect(stub.seen).toHaveLength(0);
      } else {
        const c = await connect(env); // the certificate's IP address is checked
        expect(stub.seen.length).toBeGreaterThan(0);
        await c.close();
      }
    } finally {
      await stub.close();
    }
  });

  it('names why a TLS handshake fails, where gRPC says only that the deadline passed', async () => {
    const stub = await grpcStub({ requestCert: true });
    try {
      const base = {
        TEMPORAL_ADDRESS: stub.address,
        TEMPORAL_TLS_SERVER_CA_CERT_PATH: ca.certPath,
        TEMPORAL_TLS_SERVER_NAME: 'localhost',
        TEMPORAL_TLS_CLIENT_CERT_PATH: client.certPath,
        TEMPORAL_TLS_CLIENT_KEY_PATH: client.keyPath,
      };
      const why = (env: NodeJS.ProcessEnv) => tlsHandshakeProblem(temporalConnectOptions(env));
      expect(await why(base)).toBeUndefined();
      // A closed port is no TLS problem: the connection's own error stands.
      expect(await why({ ...base, TEMPORAL_ADDRESS: '127.0.0.1:1' })).toBeUndefined();
      expect(await why({ ...base, TEMPORAL_TLS_SERVER_CA_CERT_PATH: otherCa.certPath })).toMatch(
        /self-signed certificate in certificate chain|unable to verify the first certificate/,
      );
      expect(await why({ ...base, TEMPORAL_TLS_SERVER_NAME: 'not-the-server.example' })).toMatch(
        /Host: not-the-server\.example\. is not in the cert's altnames/,
      );
      const { TEMPORAL_TLS_CLIENT_CERT_PATH: _c, TEMPORAL_TLS_CLIENT_KEY_PATH: _k, ...noClientCert } = base;
      expect(await why(noClientCert)).toMatch(
        /certificate required|handshake failure|peer did not return a certificate/i,
      );
    } finally {
      await stub.close();
    }
  });

  it('presents the client certificate to a server that demands one', async () => {
    const stub = await grpcStub({ requestCert: true });
    try {
      const env = {
        TEMPORAL_ADDRESS: stub.address,
        TEMPORAL_TLS_SERVER_CA_CERT_PATH: ca.certPath,
        TEMPORAL_TLS_SERVER_NAME: 'localhost',
      };
      await expect(connect(env)).rejects.toThrow();
      expect(stub.seen).toHaveLength(0);
      const c = await connect({
        ...env,
        TEMPORAL_TLS_CLIENT_CERT_PATH: client.certPath,
        TEMPORAL_TLS_CLIENT_KEY_PATH: client.keyPath,
      });
      expect(stub.seen.at(-1)).toMatchObject({ clientCert: true });
      await c.close();
    } finally {
      await stub.close();
    }
  });
});
