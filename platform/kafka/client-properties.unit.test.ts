// KAFKA_CLIENT_PROPERTIES: the Kafka CLI's --command-config format read into TLS and SASL settings,
// and every setting rods cannot honour refused by name, with no secret in the message.
import { mkdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Pem, TestPki } from '../../test/support/tls/certs.js';
import { ConfigError } from '../config/endpoints.js';
import { kafkajsSecurity } from './adapters/kafkajs/index.js';
import {
  kafkaBootstrap,
  loadKafkaSecurity,
  oauthTokenFromFile,
  parseKafkaClientProperties,
} from './client-properties.js';
import { defaultReplication } from './topology.js';

const pki = new TestPki();
let ca: Pem;
let client: Pem;
beforeAll(() => {
  ca = pki.ca('kafka-ca');
  client = pki.leaf('kafka-client', ca, ['rods']);
});
afterAll(() => pki.cleanup());

const file = (name: string, text: string) => {
  const p = path.join(pki.dir, name);
  writeFileSync(p, text);
  return p;
};
const parse = (text: string) =>
  parseKafkaClientProperties(text, { source: path.join(pki.dir, 'client.properties') });
const refusal = (text: string, env?: NodeJS.ProcessEnv) => {
  try {
    parseKafkaClientProperties(text, {
      source: path.join(pki.dir, 'client.properties'),
      ...(env ? { env } : {}),
    });
  } catch (e) {
    expect(e).toBeInstanceOf(ConfigError);
    return (e as Error).message;
  }
  throw new Error('not refused');
};
const SCRAM = 'org.apache.kafka.common.security.scram.ScramLoginModule';

describe('KAFKA_CLIENT_PROPERTIES', () => {
  it('unset: plaintext to KAFKA_BROKERS; a file may name bootstrap.servers, KAFKA_BROKERS wins', () => {
    expect(loadKafkaSecurity({})).toEqual({ protocol: 'PLAINTEXT', describe: 'plaintext' });
    const props = file('b.properties', 'bootstrap.servers=k1.example:9093, k2.example:9093\n');
    expect(kafkaBootstrap({ KAFKA_CLIENT_PROPERTIES: props })).toEqual([
      'k1.example:9093',
      'k2.example:9093',
    ]);
    expect(kafkaBootstrap({ KAFKA_CLIENT_PROPERTIES: props, KAFKA_BROKERS: 'k9:1' })).toEqual(['k9:1']);
    // Created topics are replicated three times on a cluster of three or more, wherever it is named.
    const three = file('b3.properties', 'bootstrap.servers=k1:9093,k2:9093,k3:9093\n');
    expect(defaultReplication({ KAFKA_CLIENT_PROPERTIES: three })).toBe(3);
    expect(defaultReplication({ KAFKA_CLIENT_PROPERTIES: props })).toBe(1);
    expect(defaultReplication({ KAFKA_CLIENT_PROPERTIES: three, KAFKA_BROKERS: 'k9:1' })).toBe(1);
    expect(() => loadKafkaSecurity({ KAFKA_CLIENT_PROPERTIES: path.join(pki.dir, 'absent') })).toThrow(
      /KAFKA_CLIENT_PROPERTIES: cannot read .*absent \(ENOENT\)/,
    );
  });

  it('SASL_SSL with SCRAM and a PEM truststore, as kafka-topics --command-config takes it', () => {
    file('ca.pem', ca.cert);
    const s = parse(
      [
        '# a managed cluster',
        'security.protocol=SASL_SSL',
        'sasl.mechanism=SCRAM-SHA-512',
        `sasl.jaas.config=${SCRAM} required \\`,
        '    username="rods" password="p\\\\"w=d";',
        'ssl.truststore.type=PEM',
        'ssl.truststore.location=ca.pem',
      ].join('\n'),
    );
    expect(s.protocol).toBe('SASL_SSL');
    expect(s.sasl).toEqual({ mechanism: 'SCRAM-SHA-512', username: 'rods', password: 'p"w=d' });
    expect(s.tls).toEqual({ ca: ca.cert, verifyHostname: true });
    expect(s.describe).toBe('SASL_SSL, SCRAM-SHA-512 as rods, CA from the properties file');
    expect(s.describe).not.toMatch(/p"w/);
    const k = kafkajsSecurity(s);
    expect(k.sasl).toEqual({ mechanism: 'scram-sha-512', username: 'rods', password: 'p"w=d' });
    expect(k.ssl).toEqual({ ca: ca.cert });
  });

  it('mutual TLS: a PEM keystore file (key and chain), or both inline; no name check when asked', () => {
    const keystore = file('client.pem', `${client.key}${client.cert}`);
    const s = parse(
      `security.protocol=SSL\nssl.keystore.type=PEM\nssl.keystore.location=${keystore}\nssl.truststore.certificates=${ca.cert.replace(/\n/g, '\\n')}\nssl.endpoint.identification.algorithm=\n`,
    );
    expect(s.tls?.key).toContain('PRIVATE KEY');
    expect(s.tls?.cert).toBe(client.cert);
    expect(s.tls?.ca).toBe(ca.cert);
    expect(s.tls?.verifyHostname).toBe(false);
    expect(s.describe).toBe('SSL, CA from the properties file, client certificate, broker names not checked');
    const ssl = kafkajsSecurity(s).ssl as { checkServerIdentity?: () => unknown; cert?: string };
    expect(ssl.cert).toBe(client.cert);
    expect(ssl.checkServerIdentity?.()).toBeUndefined();

    const inline = parse(
      `security.protocol=SSL\nssl.keystore.certificate.chain=${client.cert.replace(/\n/g, '\\n')}\nssl.keystore.key=${client.key.replace(/\n/g, '\\n')}\n`,
    );
    expect(inline.tls).toMatchObject({ cert: client.cert, key: client.key, verifyHostname: true });
    expect(inline.tls?.ca).toBeUndefined(); // the system's CAs
  });

  it("secrets from files through Kafka's config providers (file, directory, env)", () => {
    file('creds.properties', 'password=from-file\n');
    mkdirSync(path.join(pki.dir, 'secrets'), { recursive: true });
    writeFileSync(path.join(pki.dir, 'secrets', 'kafka-password'), 'from-dir\n');
    const base = [
      'config.providers=file,dir,env',
      'config.providers.file.class=org.apache.kafka.common.config.provider.FileConfigProvider',
      'config.providers.dir.class=org.apache.kafka.common.config.provider.DirectoryConfigProvider',
      'config.providers.env.class=org.apache.kafka.common.config.provider.EnvVarConfigProvider',
      'security.protocol=SASL_PLAINTEXT',
      'sasl.mechanism=PLAIN',
    ].join('\n');
    const jaas = (pw: string) =>
      `\nsasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required username="rods" password="${pw}";\n`;
    const ref = (s: string) => `\${${s}}`; // Kafka's `${provider:path:key}`
    const src = (text: string, env: NodeJS.ProcessEnv = {}) =>
      parseKafkaClientProperties(text, { source: path.join(pki.dir, 'client.properties'), env });
    expect(src(base + jaas(ref('file:creds.properties:password'))).sasl).toMatchObject({
      password: 'from-file',
    });
    expect(src(base + jaas(ref('dir:secrets:kafka-password'))).sasl).toMatchObject({ password: 'from-dir' });
    expect(src(base + jaas(ref('env:KAFKA_PW')), { KAFKA_PW: 'from-env' }).sasl).toMatchObject({
      password: 'from-env',
    });
    expect(refusal(base + jaas(ref('file:creds.properties:nope')))).toMatch(
      /creds\.properties has no key nope/,
    );
    expect(refusal(base + jaas(ref('vault:x:y')))).toMatch(/\$\{vault:\.\.\.\} names no provider/);
    expect(refusal(`${base}\nconfig.providers.x.class=com.example.Vault\n`)).toMatch(
      /config\.providers\.x\.class is set but config\.providers does not list x/,
    );
  });

  it('refuses by name what it cannot honour, and never echoes a password', () => {
    const jaas = `sasl.jaas.config=${SCRAM} required username="rods" password="hunter2";`;
    const cases: [string, RegExp][] = [
      [
        'security.protocol=SSL\nrequest.timeout.ms=30000\n',
        /request\.timeout\.ms: not a setting rods understands/,
      ],
      [
        'security.protocol=TLS\n',
        /security\.protocol=TLS: expected one of PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL/,
      ],
      [
        'security.protocol=SSL\nssl.truststore.type=JKS\nssl.truststore.location=x.jks\n',
        /ssl\.truststore\.type=JKS: rods reads PEM only/,
      ],
      [
        'security.protocol=SSL\nssl.truststore.location=absent.pem\n',
        /ssl\.truststore\.location: cannot read .*absent\.pem \(ENOENT\)/,
      ],
      [
        `security.protocol=SASL_SSL\n${jaas}\n`,
        /sasl\.mechanism=GSSAPI \(the default\): rods speaks PLAIN, SCRAM-SHA-256/,
      ],
      [
        `security.protocol=SASL_SSL\nsasl.mechanism=PLAIN\n${jaas}\n`,
        /ScramLoginModule does not serve sasl\.mechanism=PLAIN/,
      ],
      [
        `security.protocol=SASL_SSL\nsasl.mechanism=SCRAM-SHA-256\nsasl.jaas.config=${SCRAM} required username="rods";\n`,
        /needs username="\.\.\." and password/,
      ],
      [
        `security.protocol=SASL_SSL\nsasl.mechanism=SCRAM-SHA-256\nsasl.jaas.config=${SCRAM} required username="rods" password="hunter2" tokenauth=true;\n`,
        /tokenauth: not an option/,
      ],
      [
        `security.protocol=SASL_SSL\nsasl.mechanism=SCRAM-SHA-256\nsasl.jaas.config=${SCRAM} required password=hunter2 junk\n`,
        /expected "<LoginModule> required/,
      ],
      [
        `security.protocol=SASL_PLAINTEXT\nsasl.mechanism=SCRAM-SHA-256\n${jaas}\nssl.truststore.location=ca.pem\n`,
        /ssl\.truststore\.location given, but security\.protocol=SASL_PLAINTEXT has no TLS/,
      ],
      [
        `security.protocol=SSL\nsasl.mechanism=PLAIN\n`,
        /sasl\.mechanism given, but security\.protocol=SSL has no SASL/,
      ],
      [
        'security.protocol=SASL_SSL\nsasl.mechanism=OAUTHBEARER\n',
        /sasl\.oauthbearer\.token\.endpoint\.url=file:/,
      ],
      ['security.protocol=SSL\nssl.endpoint.identification.algorithm=ldap\n', /expected https, or empty/],
    ];
    for (const [text, want] of cases) {
      const msg = refusal(text);
      expect(msg, text).toMatch(want);
      expect(msg).toMatch(/^KAFKA_CLIENT_PROPERTIES .*client\.properties: /);
      expect(msg).not.toContain('hunter2');
    }
  });
});

describe('OAUTHBEARER from a token file', () => {
  const jwt = (exp: number) =>
    ['e30', Buffer.from(JSON.stringify({ sub: 'rods', exp })).toString('base64url'), 'sig'].join('.');

  it('reads the file the properties name; a new token is used at the next login; an expired one refused', async () => {
    const tokenFile = file('token.jwt', jwt(2_000));
    const s = parse(
      `security.protocol=SASL_SSL\nsasl.mechanism=OAUTHBEARER\nsasl.jaas.config=org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required;\nsasl.login.callback.handler.class=org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginCallbackHandler\nsasl.oauthbearer.token.endpoint.url=file://${tokenFile}\n`,
    );
    expect(s.sasl).toEqual({ mechanism: 'OAUTHBEARER', tokenFile });
    let now = 1_000_000;
    const provide = oauthTokenFromFile(tokenFile, () => now);
    expect((await provide()).value).toBe(jwt(2_000));
    writeFileSync(tokenFile, `${jwt(3_000)}\n`);
    expect((await provide()).value).toBe(jwt(3_000));
    now = 3_000_001;
    await expect(provide()).rejects.toThrow(/token in .*token\.jwt expired at 1970-01-01T00:50:00\.000Z/);
    writeFileSync(tokenFile, '');
    await expect(provide()).rejects.toThrow(/is empty/);
  });
});
