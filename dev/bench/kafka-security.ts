// What securing Kafka costs rods' producer: idempotent, acks=all production of N keyed messages
// over SASL_SSL with SCRAM-SHA-512 and over mutual TLS, against the same broker's plaintext
// listener in the same run. The broker is a private one (test/support/kafka/private-kafka.ts),
// configured through client properties files as an operator would.
import { writeFileSync } from 'node:fs';
import path from 'node:path';
import { ensureTopics, openKafka } from '../../platform/kafka/client.js';
import { type KafkaSecurity, loadKafkaSecurity } from '../../platform/kafka/client-properties.js';
import { startPrivateKafka } from '../../test/support/kafka/private-kafka.js';
import { TestPki } from '../../test/support/tls/certs.js';
import { sendRate } from './kafka-produce.js';
import type { BenchResult } from './result.js';

export default async function kafkaSecurity(opts: Record<string, string | boolean>): Promise<BenchResult> {
  const n = Number(opts.messages ?? 100_000);
  const pki = new TestPki();
  const ca = pki.ca('bench-ca');
  const kafka = await startPrivateKafka({
    ca,
    server: pki.leaf('broker', ca, ['localhost']),
    users: [{ name: 'admin', password: 'bench-admin' }],
    superUsers: ['User:CN=bench-mtls'],
    plaintext: true,
  });
  const props = (name: string, lines: string[]): KafkaSecurity => {
    const f = path.join(pki.dir, `${name}.properties`);
    writeFileSync(f, [...lines, ''].join('\n'));
    return loadKafkaSecurity({ KAFKA_CLIENT_PROPERTIES: f });
  };
  writeFileSync(path.join(pki.dir, 'ca.pem'), ca.cert);
  const client = pki.leaf('bench-mtls', ca, ['bench-mtls']);
  writeFileSync(path.join(pki.dir, 'keystore.pem'), `${client.key}${client.cert}`);
  const modes: Record<string, { brokers: string[]; security: KafkaSecurity }> = {
    plaintext: {
      brokers: [kafka.plaintextBootstrap!],
      security: props('plain', ['security.protocol=PLAINTEXT']),
    },
    sasl_ssl_scram: {
      brokers: [kafka.bootstrap],
      security: props('scram', [
        'security.protocol=SASL_SSL',
        'sasl.mechanism=SCRAM-SHA-512',
        'sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required username="admin" password="bench-admin";',
        'ssl.truststore.location=ca.pem',
      ]),
    },
    mtls: {
      brokers: [kafka.mtlsBootstrap],
      security: props('mtls', [
        'security.protocol=SSL',
        'ssl.truststore.location=ca.pem',
        'ssl.keystore.location=keystore.pem',
      ]),
    },
  };
  const produce = async (mode: string) => {
    const { brokers, security } = modes[mode]!;
    const k = openKafka({ brokers, security, clientId: 'rods-bench' });
    const topic = `bench.security.${mode.replace(/_/g, '-')}`;
    const admin = await k.admin();
    await ensureTopics(admin, [
      { name: topic, key: 'k', partitions: 6, replicationFactor: 1, config: {}, doc: 'bench' },
    ]);
    await admin.disconnect();
    return sendRate(await k.producer({ idempotent: true }), topic, n);
  };
  try {
    await produce('plaintext'); // warm-up: the JIT, the broker's page cache
    const baseline = await produce('plaintext');
    const scram = await produce('sasl_ssl_scram');
    const mtls = await produce('mtls');
    return {
      messages: n,
      baseline_plaintext_msgs_per_s: Math.round(baseline),
      sasl_ssl_scram_msgs_per_s: Math.round(scram),
      mtls_msgs_per_s: Math.round(mtls),
      ratio: scram / baseline,
      mtls_ratio: mtls / baseline,
    };
  } finally {
    await kafka.stop();
    pki.cleanup();
  }
}
