// `rods doctor`'s Kafka check against a secured broker of the test's own (SASL_SSL only, SCRAM,
// the StandardAuthorizer): it says how it connected, names a refused password at the first
// attempt, and tells a principal without ACLs which of rods' topics it lacks.
import { writeFileSync } from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type PrivateKafka, startPrivateKafka } from '../../../test/support/kafka/private-kafka.js';
import { type Pem, TestPki } from '../../../test/support/tls/certs.js';
import { checkKafka } from './doctor.js';

const pki = new TestPki();
let ca: Pem;
let kafka: PrivateKafka;
const saved = { props: process.env.KAFKA_CLIENT_PROPERTIES, brokers: process.env.KAFKA_BROKERS };

/** Points this test process's Kafka clients at the private broker as `user`. */
function as(user: string, password: string) {
  writeFileSync(path.join(pki.dir, 'ca.pem'), ca.cert);
  const file = path.join(pki.dir, `${user}.properties`);
  writeFileSync(
    file,
    [
      'security.protocol=SASL_SSL',
      'sasl.mechanism=SCRAM-SHA-512',
      `sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required username="${user}" password="${password}";`,
      'ssl.truststore.location=ca.pem',
      '',
    ].join('\n'),
  );
  process.env.KAFKA_CLIENT_PROPERTIES = file;
  process.env.KAFKA_BROKERS = kafka.bootstrap;
}

beforeAll(async () => {
  ca = pki.ca('doctor-ca');
  kafka = await startPrivateKafka({
    ca,
    server: pki.leaf('broker', ca, ['localhost']),
    users: [
      { name: 'admin', password: 'doctor-admin-1' },
      { name: 'stranger', password: 'doctor-stranger-2' },
    ],
  });
}, 180_000);

afterAll(async () => {
  for (const [k, v] of [
    ['KAFKA_CLIENT_PROPERTIES', saved.props],
    ['KAFKA_BROKERS', saved.brokers],
  ] as const)
    if (v === undefined) delete process.env[k];
    else process.env[k] = v;
  await kafka?.stop();
  pki.cleanup();
});

describe('rods doctor on a secured Kafka', () => {
  it('round trip as a principal allowed everything, saying how it connected', async () => {
    as('admin', 'doctor-admin-1');
    expect(await checkKafka(200)).toMatch(
      /^200 messages produced and consumed once each; project topics: 6 \(SASL_SSL, SCRAM-SHA-512 as admin, CA from the properties file\)$/,
    );
  }, 120_000);

  it('a refused password is named at the first attempt, with where and how', async () => {
    as('admin', 'not-the-password');
    // "Kafka at ...": the one-attempt probe's words, not the error after the client's retries.
    await expect(checkKafka(10)).rejects.toThrow(
      /^Kafka at localhost:\d+ \(SASL_SSL, SCRAM-SHA-512 as admin, CA from the properties file\): SASL SCRAM SHA512 authentication failed/,
    );
  }, 120_000);

  it("a principal without ACLs is told which of rods' topics it lacks", async () => {
    as('stranger', 'doctor-stranger-2');
    await expect(checkKafka(10)).rejects.toThrow(
      /Kafka topics missing and this principal may not create them .*rods\.rewards\.v1 \(\d+ partitions/,
    );
  }, 120_000);
});
