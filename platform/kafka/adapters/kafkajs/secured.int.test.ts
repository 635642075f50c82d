// rods against a Kafka secured as a managed cluster is (test/support/kafka/private-kafka.ts:
// SASL_SSL only, SCRAM-SHA-512, the StandardAuthorizer, nothing without an ACL), configured the
// way an operator configures Kafka's own tools: a client properties file (KAFKA_CLIENT_PROPERTIES),
// its password in a file through Kafka's FileConfigProvider. The ACLs are granted with kafkajs'
// admin here because Kafka 4's kafka-acls tool is not among the jars the stack downloads.
import { writeFileSync } from 'node:fs';
import path from 'node:path';
import kafkajs, { Kafka } from 'kafkajs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type PrivateKafka, startPrivateKafka } from '../../../../test/support/kafka/private-kafka.js';
import { type Pem, TestPki } from '../../../../test/support/tls/certs.js';
import { ensureTopics, openKafka, readUntil, TopicsMissingError } from '../../client.js';
import { type KafkaSecurity, loadKafkaSecurity } from '../../client-properties.js';
import type { TopicSpec } from '../../topology.js';
import { kafkajsSecurity } from './index.js';

const { AclOperationTypes, AclPermissionTypes, AclResourceTypes, ResourcePatternTypes } = kafkajs;

const pki = new TestPki();
let ca: Pem;
let otherCa: Pem;
let kafka: PrivateKafka;
const USERS = [
  { name: 'admin', password: 'admin-secret-1' },
  { name: 'rods', password: 'rods-secret-2' },
  { name: 'reader', password: 'reader-secret-3' },
  { name: 'stranger', password: 'stranger-secret-4' },
];
const spec = (name: string): TopicSpec => ({
  name,
  key: 'task id',
  partitions: 2,
  replicationFactor: 1,
  config: { 'retention.ms': '-1', 'cleanup.policy': 'delete' },
  doc: 'test',
});

/** A client properties file as an operator writes one; the password in a file of its own. */
function properties(user: string, password: string, extra: string[] = [], caPem = ca): KafkaSecurity {
  const dir = pki.dir;
  writeFileSync(path.join(dir, `${user}-ca.pem`), caPem.cert);
  writeFileSync(path.join(dir, `${user}-secret.properties`), `password=${password}\n`);
  const file = path.join(dir, `${user}.properties`);
  writeFileSync(
    file,
    [
      'config.providers=file',
      'config.providers.file.class=org.apache.kafka.common.config.provider.FileConfigProvider',
      'security.protocol=SASL_SSL',
      'sasl.mechanism=SCRAM-SHA-512',
      `sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required username="${user}" password="\${file:${user}-secret.properties:password}";`,
      'ssl.truststore.type=PEM',
      `ssl.truststore.location=${user}-ca.pem`,
      ...extra,
      '',
    ].join('\n'),
  );
  return loadKafkaSecurity({ KAFKA_CLIENT_PROPERTIES: file });
}

// One attempt for what is expected to be refused; the client's retries for what must work.
const client = (security: KafkaSecurity, brokers = [kafka.bootstrap], probe = true) =>
  openKafka({
    brokers,
    security,
    clientId: 'rods-secured-test',
    ...(probe ? { retries: 0, quiet: true } : {}),
  });

async function describeWith(security: KafkaSecurity, brokers?: string[]) {
  const admin = await client(security, brokers).admin();
  try {
    return await admin.describeCluster();
  } finally {
    await admin.disconnect();
  }
}

beforeAll(async () => {
  ca = pki.ca('kafka-ca');
  otherCa = pki.ca('other-ca');
  const server = pki.leaf('broker', ca, ['localhost']);
  kafka = await startPrivateKafka({ ca, server, users: USERS });
  const admin = properties('admin', 'admin-secret-1');
  const deadline = Date.now() + 120_000;
  for (;;) {
    try {
      await describeWith(admin);
      break;
    } catch (e) {
      if (Date.now() > deadline)
        throw new Error(`the private broker did not answer: ${(e as Error).message}\n${kafka.log()}`);
      await new Promise((r) => setTimeout(r, 500));
    }
  }
  const k = new Kafka({ brokers: [kafka.bootstrap], clientId: 'acl-grant', ...kafkajsSecurity(admin) });
  const a = k.admin();
  await a.connect();
  const allow = (principal: string, resourceType: number, resourceName: string, operation: number) => ({
    principal,
    resourceType,
    resourceName,
    resourcePatternType: ResourcePatternTypes.PREFIXED,
    host: '*',
    operation,
    permissionType: AclPermissionTypes.ALLOW,
  });
  await a.createAcls({
    acl: [
      allow('User:rods', AclResourceTypes.TOPIC, 'sec.', AclOperationTypes.ALL),
      allow('User:rods', AclResourceTypes.GROUP, 'rods-', AclOperationTypes.ALL),
      // mutual TLS: the certificate's subject is the principal; OAUTHBEARER: the token's sub.
      allow('User:CN=rods-mtls', AclResourceTypes.TOPIC, 'sec.', AclOperationTypes.ALL),
      allow('User:rods-oauth', AclResourceTypes.TOPIC, 'sec.', AclOperationTypes.ALL),
      // reader: uses topics an administrator made, may not create any.
      ...[
        AclOperationTypes.DESCRIBE,
        AclOperationTypes.DESCRIBE_CONFIGS,
        AclOperationTypes.READ,
        AclOperationTypes.WRITE,
      ].map((op) => allow('User:reader', AclResourceTypes.TOPIC, 'sec.', op)),
    ],
  });
  await a.disconnect();
}, 180_000);

afterAll(async () => {
  await kafka?.stop();
  pki.cleanup();
});

describe('rods on a SASL_SSL Kafka with SCRAM and ACLs', () => {
  it('creates its topics, writes and reads back, with the password from a file and the CA checked', async () => {
    const security = properties('rods', 'rods-secret-2');
    expect(security.describe).toBe('SASL_SSL, SCRAM-SHA-512 as rods, CA from the properties file');
    const c = client(security, [kafka.bootstrap], false);
    const admin = await c.admin();
    try {
      expect(await ensureTopics(admin, [spec('sec.rewards')])).toMatchObject({ created: ['sec.rewards'] });
    } finally {
      await admin.disconnect();
    }
    const producer = await c.producer();
    await producer.send('sec.rewards', [{ key: 'task-1', value: Buffer.from('reward 0.5') }]);
    await producer.disconnect();
    let seen: string | undefined;
    await readUntil(
      'sec.rewards',
      (r) => {
        seen = r.value?.toString();
        return true;
      },
      { client: c, timeoutMs: 60_000 },
    );
    expect(seen).toBe('reward 0.5');
  }, 120_000);

  it('a principal that may not create topics is told which are missing and how to create them', async () => {
    const reader = await client(properties('reader', 'reader-secret-3')).admin();
    try {
      const err = await ensureTopics(reader, [spec('sec.rewards'), spec('sec.decisions')]).catch((e) => e);
      expect(err).toBeInstanceOf(TopicsMissingError);
      expect((err as TopicsMissingError).missing.map((s) => s.name)).toEqual(['sec.decisions']);
      expect(err.message).toMatch(/TOPIC_AUTHORIZATION_FAILED|CLUSTER_AUTHORIZATION_FAILED/);
      expect(err.message).toContain(
        'sec.decisions (2 partitions, replication 1, retention.ms=-1, cleanup.policy=delete)',
      );
      expect(err.message).toContain('--create --topic sec.decisions --partitions 2 --replication-factor 1');
    } finally {
      await reader.disconnect();
    }
    // No ACL at all: the broker shows it no topic, and creating is refused as well.
    const stranger = await client(properties('stranger', 'stranger-secret-4')).admin();
    try {
      const err = await ensureTopics(stranger, [spec('sec.rewards')]).catch((e) => e);
      expect(err).toBeInstanceOf(TopicsMissingError);
    } finally {
      await stranger.disconnect();
    }
  }, 120_000);

  it('mutual TLS: a PEM keystore (key and chain in one file) is the identity; without one, refused', async () => {
    const cert = pki.leaf('rods-mtls', ca, ['rods-mtls']);
    const keystore = path.join(pki.dir, 'rods-mtls-keystore.pem');
    writeFileSync(keystore, `${cert.key}${cert.cert}`);
    writeFileSync(path.join(pki.dir, 'mtls-ca.pem'), ca.cert);
    const file = (lines: string[]) => {
      const f = path.join(pki.dir, 'mtls.properties');
      writeFileSync(
        f,
        ['security.protocol=SSL', 'ssl.truststore.location=mtls-ca.pem', ...lines, ''].join('\n'),
      );
      return loadKafkaSecurity({ KAFKA_CLIENT_PROPERTIES: f });
    };
    const withCert = file(['ssl.keystore.type=PEM', `ssl.keystore.location=${keystore}`]);
    const admin = await client(withCert, [kafka.mtlsBootstrap], false).admin();
    try {
      expect(await ensureTopics(admin, [spec('sec.mtls')])).toMatchObject({ created: ['sec.mtls'] });
    } finally {
      await admin.disconnect();
    }
    await expect(describeWith(file([]), [kafka.mtlsBootstrap])).rejects.toThrow(
      /alert bad certificate|certificate required/,
    );
  }, 120_000);

  it('OAUTHBEARER: the token file is read at each login; an expired token is refused by name before it is sent', async () => {
    const token = path.join(pki.dir, 'oauth.jwt');
    const unsigned = (sub: string, exp: number) =>
      `${Buffer.from('{"alg":"none"}').toString('base64url')}.${Buffer.from(JSON.stringify({ sub, iat: Math.floor(Date.now() / 1000) - 5, exp })).toString('base64url')}.`;
    const now = () => Math.floor(Date.now() / 1000);
    writeFileSync(token, unsigned('rods-oauth', now() + 3600));
    writeFileSync(path.join(pki.dir, 'oauth-ca.pem'), ca.cert);
    const f = path.join(pki.dir, 'oauth.properties');
    writeFileSync(
      f,
      [
        'security.protocol=SASL_SSL',
        'sasl.mechanism=OAUTHBEARER',
        'sasl.jaas.config=org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required;',
        `sasl.oauthbearer.token.endpoint.url=file://${token}`,
        'ssl.truststore.location=oauth-ca.pem',
        '',
      ].join('\n'),
    );
    const security = loadKafkaSecurity({ KAFKA_CLIENT_PROPERTIES: f });
    const admin = await client(security, [kafka.bootstrap], false).admin();
    try {
      expect(await ensureTopics(admin, [spec('sec.oauth')])).toMatchObject({ created: ['sec.oauth'] });
    } finally {
      await admin.disconnect();
    }
    // Another subject written to the file: the next login is that principal, which has no ACL.
    writeFileSync(token, unsigned('nobody', now() + 3600));
    const other = await client(security).admin();
    try {
      await expect(ensureTopics(other, [spec('sec.oauth-2')])).rejects.toBeInstanceOf(TopicsMissingError);
    } finally {
      await other.disconnect();
    }
    writeFileSync(token, unsigned('rods-oauth', now() - 60));
    await expect(describeWith(security)).rejects.toThrow(/OAUTHBEARER token in .*oauth\.jwt expired at/);
  }, 120_000);

  it('refuses a wrong password, another CA and a name the certificate lacks', async () => {
    await expect(describeWith(properties('rods', 'not-the-password'))).rejects.toThrow(
      /SASL SCRAM SHA512 authentication failed/,
    );
    await expect(describeWith(properties('rods', 'rods-secret-2', [], otherCa))).rejects.toThrow(
      /unable to verify the first certificate/,
    );
    // 127.0.0.1 is not among the certificate's names ...
    const byIp = [`127.0.0.1:${kafka.port}`];
    await expect(describeWith(properties('rods', 'rods-secret-2'), byIp)).rejects.toThrow(
      /IP: 127\.0\.0\.1 is not in the cert's list/,
    );
    // ... unless the operator turns the name check off, as Kafka's own setting does.
    const unchecked = properties('rods', 'rods-secret-2', ['ssl.endpoint.identification.algorithm=']);
    expect((await describeWith(unchecked, byIp)).brokers).toHaveLength(1);
  }, 120_000);
});
