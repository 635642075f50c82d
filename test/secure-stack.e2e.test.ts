// rods on the secured stack (infra/stack/secure.ts), end to end: a stack of this file's own
// started as `stack:up --secure` starts it (Kafka SASL_SSL with SCRAM and ACLs, PostgreSQL
// TLS-only reached with verify-full, Temporal behind nginx demanding a client certificate, the
// executor with a token), a campaign run through an HTTPS gateway by the demo's processes, the
// Python client reading the pool with the stack's CA. Then what must be refused is, each with
// a message that says what to check, and nothing the campaign recorded is lost.
import { execFile, spawn } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { portOpen } from '../infra/stack/proc.js';
import { fingerprintOf, servedFingerprint, untilServing } from '../infra/stack/secure.js';
import { openKafka } from '../platform/kafka/client.js';
import { loadKafkaSecurity } from '../platform/kafka/client-properties.js';
import { createClient } from '../platform/store/db.js';
import { freePort } from '../platform/util/free-port.js';
import { clientPython, installClientPackage } from './support/python/venv.js';
import { type PrivateSecureStack, startPrivateSecureStack } from './support/secure-stack.js';
import { ROOT } from './support/sources.js';
import { type Pem, TestPki } from './support/tls/certs.js';
import { waitUntil } from './support/wait.js';

const execFileP = promisify(execFile);
const pki = new TestPki();
let stack: PrivateSecureStack;
let otherCa: Pem;
let campaignId = '';
let gatewayUrl = '';
let readToken = '';
let stopGateway = '';

interface Check {
  service: string;
  ok: boolean;
  detail: string;
}

/** `rods doctor --json` on the stack with these changes to its environment. */
async function doctor(change: NodeJS.ProcessEnv = {}): Promise<Check[]> {
  const env = { ...stack.env, ...change };
  for (const [k, v] of Object.entries(change)) if (v === undefined) delete env[k];
  const r = await execFileP(
    process.execPath,
    // The generator is not part of the secured stack (its probe has unit tests of its own).
    [path.join(ROOT, 'bin/rods.mjs'), 'doctor', '--json', '--messages', '10', '--skip-generator'],
    {
      cwd: ROOT,
      env,
      maxBuffer: 16 << 20,
    },
  ).catch((e: { stdout?: string }) => ({ stdout: e.stdout ?? '' }));
  return (JSON.parse(r.stdout) as { checks: Check[] }).checks;
}

const failed = (checks: Check[]) => checks.filter((c) => !c.ok).map((c) => `${c.service}: ${c.detail}`);

/** The Python client, run in the client venv with this environment; prints one JSON line. */
async function python(code: string, env: NodeJS.ProcessEnv): Promise<Record<string, unknown>> {
  const r = await execFileP(clientPython(), ['-c', code], { cwd: ROOT, env, maxBuffer: 4 << 20 });
  return JSON.parse(r.stdout.trim().split('\n').at(-1)!) as Record<string, unknown>;
}

/** A Python program that reads the campaign's pool with the client; prints its size or the error. */
const code = (url: string, token: string, campaign: string) =>
  [
    'import json, sys',
    `sys.path.insert(0, ${JSON.stringify(path.join(ROOT, 'clients/python'))})`,
    'from rods_client import RodsClient',
    'try:',
    `    c = RodsClient(${JSON.stringify(url)}, ${JSON.stringify(token)}, ${JSON.stringify(campaign)}, retries=0)`,
    '    print(json.dumps({"tasks": len(c.fetch_pool()["tasks"])}))',
    'except Exception as e:',
    '    print(json.dumps({"error": str(e)}))',
  ].join('\n');

/** Rows of the campaign's event streams (everything it recorded). */
async function recordedEvents(): Promise<number> {
  const url = readFileSync(stack.env.DATABASE_URL_FILE!, 'utf8').trim();
  const c = createClient({ connectionString: url });
  await c.connect();
  try {
    const r = await c.query<{ n: string }>('select count(*) as n from events where stream_id like $1', [
      `%${campaignId}%`,
    ]);
    return Number(r.rows[0]!.n);
  } finally {
    await c.end();
  }
}

beforeAll(async () => {
  otherCa = pki.ca('other-ca');
  // Only `localhost`: connecting by 127.0.0.1 is then a wrong host.
  const [started, installed] = await Promise.allSettled([
    startPrivateSecureStack({ names: ['localhost'] }),
    installClientPackage(),
  ]);
  // Kept before anything throws, so afterAll stops a stack that started beside a failed install.
  if (started.status === 'fulfilled') stack = started.value;
  for (const r of [started, installed]) if (r.status === 'rejected') throw r.reason;
}, 600_000);

afterAll(async () => {
  if (stopGateway) await execFileP('sh', [stopGateway]).catch(() => {});
  await stack?.stop();
  pki.cleanup();
});

describe('the secured stack', () => {
  it('runs a campaign end to end: HTTPS gateway, SASL_SSL Kafka, verify-full PostgreSQL, mutual-TLS Temporal', async () => {
    const out = path.join(stack.dir, 'demo-report');
    const r = await execFileP(
      process.execPath,
      [
        path.join(ROOT, 'bin/rods-dev.mjs'),
        'demo',
        ...[
          '--steps',
          '3',
          '--per-category',
          '5',
          '--checkpoint-every',
          '2',
          '--out',
          out,
          '--json',
          '--keep',
        ],
      ],
      { cwd: ROOT, env: stack.env, maxBuffer: 64 << 20 },
    );
    const summary = JSON.parse(r.stdout) as {
      manifest: { verified: boolean; trainerStep: number; groups: number; groupsPosted: number };
      dashboard: { url: string; tokenFile: string; stopScript?: string };
    };
    // The kept gateway is stopped after the file whatever the assertions below say.
    stopGateway = summary.dashboard.stopScript ?? '';
    // The trainer's checkpoints (every 2 steps) were recorded and their manifests verify.
    expect(summary.manifest.verified).toBe(true);
    expect(summary.manifest.trainerStep).toBeGreaterThanOrEqual(2);
    expect(summary.manifest.groups).toBeGreaterThan(0);
    expect(summary.manifest.groupsPosted).toBe(summary.manifest.groups);
    const url = new URL(summary.dashboard.url);
    expect(url.protocol).toBe('https:');
    gatewayUrl = url.origin;
    campaignId = /campaign=([^&]+)/.exec(url.hash)![1]!;
    readToken = readFileSync(summary.dashboard.tokenFile, 'utf8').trim();
    expect(await recordedEvents()).toBeGreaterThan(0);

    // The Python client reads the pool over HTTPS, verifying the gateway against the stack's CA.
    const base = { ...stack.env, SSL_CERT_FILE: undefined, REQUESTS_CA_BUNDLE: undefined };
    const pool = code(gatewayUrl, readToken, campaignId);
    const trusted = await python(pool, { ...base, RODS_CA_BUNDLE: stack.files.ca });
    expect(trusted.tasks).toBeGreaterThan(0);
    const untrusted = await python(pool, { ...base, RODS_CA_BUNDLE: otherCa.certPath });
    expect(untrusted.error).toMatch(/CERTIFICATE_VERIFY_FAILED|certificate verify failed/);
    // A token is never sent in the clear beyond loopback.
    const plain = await python(code('http://gateway.example.org:8443', readToken, campaignId), base);
    expect(plain.error).toMatch(
      /refusing to send the bearer token over plain http:\/\/ to gateway\.example\.org/,
    );
  }, 900_000);

  it('refuses what it must, each with what to check, and loses nothing the campaign recorded', async () => {
    expect(campaignId, 'the campaign test ran first').not.toBe('');
    const before = await recordedEvents();
    expect(failed(await doctor())).toEqual([]);

    // Kafka: another CA, a wrong password, rods' principal outside its own topics.
    const props = readFileSync(stack.env.KAFKA_CLIENT_PROPERTIES!, 'utf8');
    const variant = (name: string, text: string) => {
      const file = path.join(pki.dir, name);
      writeFileSync(file, text);
      return file;
    };
    const wrongCa = variant(
      'kafka-other-ca.properties',
      props.replace(/^ssl\.truststore\.location=.*$/m, `ssl.truststore.location=${otherCa.certPath}`),
    );
    expect(failed(await doctor({ KAFKA_CLIENT_PROPERTIES: wrongCa }))).toEqual([
      expect.stringMatching(/^kafka: Kafka at localhost:\d+ \(SASL_SSL.*not signed by the CA given/),
    ]);
    const pwFile = variant('wrong.password', 'password=not-the-password\n');
    const wrongPw = variant(
      'kafka-wrong-password.properties',
      props.replace(/\$\{file:[^:]+:password\}/, `\${file:${pwFile}:password}`),
    );
    expect(failed(await doctor({ KAFKA_CLIENT_PROPERTIES: wrongPw }))).toEqual([
      expect.stringMatching(/^kafka: .*SASL SCRAM SHA512 authentication failed/),
    ]);
    // The ACLs: rods' principal may not touch a topic outside `rods.` (the admin made one).
    const admin = openKafka({
      security: loadKafkaSecurity({ KAFKA_CLIENT_PROPERTIES: stack.files.kafkaAdminProperties }),
      clientId: 'secure-e2e-admin',
    });
    const a = await admin.admin();
    await a.createTopics([
      {
        name: 'other.team.v1',
        key: 'none',
        partitions: 1,
        replicationFactor: 1,
        config: {},
        doc: 'not rods',
      },
    ]);
    await a.disconnect();
    const rods = openKafka({
      security: loadKafkaSecurity({ KAFKA_CLIENT_PROPERTIES: stack.env.KAFKA_CLIENT_PROPERTIES! }),
      clientId: 'secure-e2e-rods',
      // An idempotent producer needs retries; a refused authorization is not retried anyway.
      retries: 1,
      quiet: true,
    });
    // The gateway's direct publish and the relay open idempotent producers: InitProducerId needs
    // IdempotentWrite on the cluster, which rods' ACLs grant (without it every batch took the
    // ingestion workflow's slower path).
    const idempotent = await rods.producer({ idempotent: true });
    await idempotent.disconnect();
    const p = await rods.producer({ idempotent: false });
    await expect(p.send('other.team.v1', [{ key: 'k', value: Buffer.from('v') }])).rejects.toThrow(
      /not authorized|authoriz/i,
    );
    await p.disconnect();

    // PostgreSQL: another CA, a host the certificate does not carry, no TLS at all.
    const dbUrl = readFileSync(stack.env.DATABASE_URL_FILE!, 'utf8').trim();
    const db = (f: (u: URL) => void) => {
      const u = new URL(dbUrl);
      f(u);
      return {
        DATABASE_URL_FILE: undefined,
        RODS_MIGRATE_DATABASE_URL_FILE: undefined,
        DATABASE_URL: u.toString(),
      };
    };
    expect(failed(await doctor(db((u) => u.searchParams.set('sslrootcert', otherCa.certPath))))).toEqual([
      expect.stringMatching(
        /^postgres: PostgreSQL at localhost:\d+ \(sslmode=verify-full\).*not signed by the CA given/,
      ),
    ]);
    expect(failed(await doctor(db((u) => (u.hostname = '127.0.0.1'))))).toEqual([
      expect.stringMatching(
        /^postgres: PostgreSQL at 127\.0\.0\.1:\d+ .*does not carry the name connected to/,
      ),
    ]);
    expect(failed(await doctor(db((u) => u.searchParams.set('sslmode', 'disable'))))).toEqual([
      expect.stringMatching(/^postgres: no pg_hba\.conf entry for host .* no encryption/),
    ]);

    // Temporal: no client certificate, another CA.
    expect(
      failed(
        await doctor({ TEMPORAL_TLS_CLIENT_CERT_PATH: undefined, TEMPORAL_TLS_CLIENT_KEY_PATH: undefined }),
      ),
    ).toEqual([
      expect.stringMatching(
        /^temporal: Temporal at localhost:\d+ \(TLS\): the TLS handshake failed: .*client certificate/,
      ),
    ]);
    expect(failed(await doctor({ TEMPORAL_TLS_SERVER_CA_CERT_PATH: otherCa.certPath }))).toEqual([
      expect.stringMatching(/^temporal: .*the TLS handshake failed: .*not signed by the CA given/),
    ]);

    // The executor (HTTPS on loopback): without its token, refused by name; with it, answered.
    // Run in a process of its own: Node trusts the stack's CA (NODE_EXTRA_CA_CERTS) from its start.
    const script = path.join(stack.dir, 'executor-probe.ts');
    writeFileSync(
      script,
      [
        `import { ExecutorClient } from ${JSON.stringify(path.join(ROOT, 'activities/executor-client.ts'))};`,
        'const c = new ExecutorClient();',
        'try {',
        "  console.log(JSON.stringify({ seeds: (await c.seeds('base', 1)).length, url: c.url }));",
        '} catch (e) {',
        '  console.log(JSON.stringify({ error: (e as Error).message, url: c.url }));',
        '}',
      ].join('\n'),
    );
    const executor = async (env: NodeJS.ProcessEnv) => {
      const r = await execFileP(
        process.execPath,
        [path.join(ROOT, 'node_modules/tsx/dist/cli.mjs'), script],
        {
          cwd: ROOT,
          env,
        },
      );
      return JSON.parse(r.stdout.trim().split('\n').at(-1)!) as {
        seeds?: number;
        error?: string;
        url: string;
      };
    };
    const withToken = await executor(stack.env);
    expect(withToken).toMatchObject({ seeds: 1, url: expect.stringMatching(/^https:\/\/localhost:/) });
    const { RODS_EXECUTOR_TOKEN_FILE: _t, ...noToken } = stack.env;
    expect((await executor(noToken)).error).toMatch(/RODS_EXECUTOR_TOKEN_FILE/);
    const { NODE_EXTRA_CA_CERTS: _ca, ...noCa } = stack.env;
    expect((await executor(noCa)).error).toMatch(
      /refused the TLS connection .*not signed by the CA given.*NODE_EXTRA_CA_CERTS/,
    );
    // A trainer's BFCL environment (rods_client.bfcl) reaches the same executor: its token from
    // the same file, its certificate checked against the stack's CA, one live session.
    const episode = [
      'import json, sys',
      `sys.path.insert(0, ${JSON.stringify(path.join(ROOT, 'clients/python'))})`,
      'from rods_client.bfcl import ExecutorClient',
      'try:',
      '    c = ExecutorClient()',
      '    s = c.open_session({"involved_classes": ["MathAPI"]})',
      '    r = c.session_calls(s, ["add(a=2, b=3)"])["results"][0]',
      '    c.close_session(s)',
      '    print(json.dumps({"text": r["text"], "url": c.url}))',
      'except Exception as e:',
      '    print(json.dumps({"error": str(e)}))',
    ].join('\n');
    const trainerSide = { ...stack.env, RODS_CA_BUNDLE: stack.files.ca, SSL_CERT_FILE: undefined };
    expect(await python(episode, trainerSide)).toMatchObject({
      text: '{"result": 5}', // bfcl's text: Python's json.dumps
      url: expect.stringMatching(/^https:\/\/localhost:/),
    });
    expect((await python(episode, { ...trainerSide, RODS_EXECUTOR_TOKEN_FILE: undefined })).error).toMatch(
      /refused a request: 401 .*RODS_EXECUTOR_TOKEN_FILE/,
    );
    expect((await python(episode, { ...trainerSide, RODS_CA_BUNDLE: otherCa.certPath })).error).toMatch(
      /CERTIFICATE_VERIFY_FAILED|certificate verify failed/,
    );

    // The gateway: an expired certificate is refused at start; one for another name, by the client.
    const gwCa = pki.ca('gateway-ca');
    const expired = pki.leaf('expired-gateway', gwCa, ['localhost'], { expired: true });
    const gateway = ['gateway', '--port', String(await freePort())];
    const gwEnv = { ...stack.env, RODS_GATEWAY_TOKENS: 'secure-e2e-token admin' };
    const refused = await execFileP(
      process.execPath,
      [
        path.join(ROOT, 'bin/rods.mjs'),
        ...gateway,
        '--tls-cert',
        expired.certPath,
        '--tls-key',
        expired.keyPath,
      ],
      { cwd: ROOT, env: gwEnv },
    ).then(
      () => 'started',
      (e: { code?: number; stderr?: string }) => `exit ${e.code}: ${e.stderr}`,
    );
    expect(refused).toMatch(/^exit [1-9]: .*TLS certificate .*expired-gateway\.crt expired on /s);
    const elsewhere = pki.leaf('elsewhere-gateway', gwCa, ['gateway.elsewhere.test']);
    const port = await freePort();
    let output = '';
    const gw = spawn(
      process.execPath,
      [
        path.join(ROOT, 'bin/rods.mjs'),
        ...[
          'gateway',
          '--port',
          String(port),
          '--tls-cert',
          elsewhere.certPath,
          '--tls-key',
          elsewhere.keyPath,
        ],
      ],
      { cwd: ROOT, env: gwEnv, stdio: ['ignore', 'pipe', 'pipe'] },
    );
    gw.stdout.on('data', (d) => (output += d));
    gw.stderr.on('data', (d) => (output += d));
    try {
      await waitUntil(() => gw.exitCode === null && portOpen('127.0.0.1', port), {
        what: () => `the gateway listening on ${port}: ${output}`,
        timeoutMs: 120_000,
      });
      const r = await python(code(`https://localhost:${port}`, 'secure-e2e-token', campaignId), {
        ...stack.env,
        SSL_CERT_FILE: undefined,
        REQUESTS_CA_BUNDLE: undefined,
        RODS_CA_BUNDLE: gwCa.certPath,
      });
      expect(r.error).toMatch(/Hostname mismatch|doesn't match|not valid for/i);
    } finally {
      gw.kill('SIGTERM');
    }

    // Nothing recorded was lost, and the stack still answers every check.
    expect(await recordedEvents()).toBe(before);
    expect(failed(await doctor())).toEqual([]);
  }, 600_000);

  it('rotates the server certificate: every service and the running gateway present the new one, and clients go on', async () => {
    expect(gatewayUrl, 'the campaign test ran first').not.toBe('');
    const before = await recordedEvents();
    const gw = new URL(gatewayUrl);
    const gatewayServes = () => servedFingerprint(gw.hostname, Number(gw.port));
    expect(await gatewayServes()).toBe(fingerprintOf(stack.files.serverCert));
    const r = JSON.parse(await stack.stack(['rotate-certs', '--json'])) as {
      before: string;
      after: string;
      services: Record<string, string>;
    };
    expect(r.after).not.toBe(r.before);
    expect(fingerprintOf(stack.files.serverCert)).toBe(r.after);
    expect(Object.keys(r.services).sort()).toEqual(['kafka', 'postgres', 'temporal']);
    // Each presents the new certificate now (rotate-certs waited for it); checked here again.
    const { kafka, postgres, temporal } = stack.ports;
    expect(await servedFingerprint('localhost', kafka)).toBe(r.after);
    expect(await servedFingerprint('localhost', postgres, { postgres: true })).toBe(r.after);
    expect(
      await servedFingerprint('localhost', temporal, {
        clientCert: stack.files.clientCert,
        clientKey: stack.files.clientKey,
      }),
    ).toBe(r.after);
    // The gateway was not restarted: it takes the rotated files at its next poll of them.
    await untilServing('the gateway', gatewayServes, r.after);
    const pool = await python(code(gatewayUrl, readToken, campaignId), {
      ...stack.env,
      SSL_CERT_FILE: undefined,
      REQUESTS_CA_BUNDLE: undefined,
      RODS_CA_BUNDLE: stack.files.ca,
    });
    expect(pool.tasks).toBeGreaterThan(0);
    // New connections to every service verify the new certificate; nothing recorded was lost.
    expect(failed(await doctor())).toEqual([]);
    expect(await recordedEvents()).toBe(before);
  }, 300_000);
});
