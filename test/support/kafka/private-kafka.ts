// A Kafka broker of one test's own, secured as a managed cluster is: one KRaft node from the
// stack's jars (.stack/kafka/libs) with two client listeners, both TLS with a PEM certificate the
// test's CA signed for `localhost`: SASL_SSL (SCRAM-SHA-512, and OAUTHBEARER with unsigned tokens)
// and SSL demanding a client certificate; the StandardAuthorizer, no access without an ACL. Users and their SCRAM passwords are written at format time. The controller
// listener is plaintext on loopback and its principal (ANONYMOUS) a super user: the quorum of one
// node talks to itself there; no client is pointed at it.
import { type ChildProcess, spawn } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, openSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { newClusterId } from '../../../infra/stack/kafka.js';
import { paths } from '../../../infra/stack/paths.js';
import { portOpen, run, waitFor } from '../../../infra/stack/proc.js';
import { freeServicePort } from '../../../platform/util/free-port.js';
import type { Pem } from '../tls/certs.js';

export interface PrivateKafka {
  /** `localhost:<port>`: the name the broker's certificate carries. */
  bootstrap: string;
  port: number;
  /** `localhost:<port>` of the SSL listener that demands a client certificate (mutual TLS). */
  mtlsBootstrap: string;
  /** With `plaintext`: the PLAINTEXT listener. */
  plaintextBootstrap?: string;
  dir: string;
  /** The broker's log, for a failing test's message. */
  log(): string;
  stop(): Promise<void>;
}

export async function startPrivateKafka(opts: {
  ca: Pem;
  /** The broker's certificate (for `localhost`) and key. */
  server: Pem;
  /** SCRAM-SHA-512 users; the first is the super user the broker itself logs in as. */
  users: { name: string; password: string }[];
  /** More super users (e.g. `User:CN=<name>` of a client certificate). */
  superUsers?: string[];
  /** Also a PLAINTEXT listener on loopback (a benchmark's baseline; its clients are super users). */
  plaintext?: boolean;
}): Promise<PrivateKafka> {
  const libs = path.join(paths.stack, 'kafka', 'libs');
  if (!existsSync(libs)) throw new Error(`Kafka's jars are not in ${libs} (npm run stack:up fetches them)`);
  const dir = mkdtempSync(path.join(tmpdir(), 'rods-kafka-'));
  const [port, mtlsPort, controllerPort, plainPort] = [
    await freeServicePort(),
    await freeServicePort(),
    await freeServicePort(),
    await freeServicePort(),
  ];
  const plain = opts.plaintext ? `,PLAIN://127.0.0.1:${plainPort}` : '';
  const admin = opts.users[0]!;
  writeFileSync(path.join(dir, 'broker.pem'), `${opts.server.key}${opts.server.cert}`);
  writeFileSync(path.join(dir, 'ca.pem'), opts.ca.cert);
  const props = path.join(dir, 'server.properties');
  writeFileSync(
    props,
    [
      'process.roles=broker,controller',
      'node.id=1',
      `controller.quorum.voters=1@127.0.0.1:${controllerPort}`,
      `listeners=SASL_SSL://localhost:${port},MTLS://localhost:${mtlsPort},CONTROLLER://127.0.0.1:${controllerPort}${plain}`,
      `advertised.listeners=SASL_SSL://localhost:${port},MTLS://localhost:${mtlsPort}${plain}`,
      'listener.security.protocol.map=SASL_SSL:SASL_SSL,MTLS:SSL,CONTROLLER:PLAINTEXT,PLAIN:PLAINTEXT',
      // Mutual TLS: the client's certificate is its identity (principal User:CN=<name>).
      'listener.name.mtls.ssl.client.auth=required',
      // OAUTHBEARER beside SCRAM; with no JWKS URL the broker takes unsigned tokens (alg none)
      // and checks their expiry: what a test needs of a token file, not what production runs.
      'listener.name.sasl_ssl.oauthbearer.sasl.jaas.config=org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required;',
      'controller.listener.names=CONTROLLER',
      'inter.broker.listener.name=SASL_SSL',
      'sasl.enabled.mechanisms=SCRAM-SHA-512,OAUTHBEARER',
      'sasl.mechanism.inter.broker.protocol=SCRAM-SHA-512',
      `listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required username="${admin.name}" password="${admin.password}";`,
      'ssl.keystore.type=PEM',
      `ssl.keystore.location=${path.join(dir, 'broker.pem')}`,
      'ssl.truststore.type=PEM',
      `ssl.truststore.location=${path.join(dir, 'ca.pem')}`,
      'authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer',
      `super.users=${[`User:${admin.name}`, 'User:ANONYMOUS', ...(opts.superUsers ?? [])].join(';')}`,
      'allow.everyone.if.no.acl.found=false',
      `log.dirs=${path.join(dir, 'data')}`,
      'num.partitions=1',
      'offsets.topic.replication.factor=1',
      'offsets.topic.num.partitions=1',
      'transaction.state.log.replication.factor=1',
      'transaction.state.log.min.isr=1',
      'group.initial.rebalance.delay.ms=0',
      'auto.create.topics.enable=false',
      '',
    ].join('\n'),
  );
  const log4j = path.join(dir, 'log4j2.properties');
  writeFileSync(
    log4j,
    [
      'appender.stdout.type=Console',
      'appender.stdout.name=STDOUT',
      'appender.stdout.layout.type=PatternLayout',
      'appender.stdout.layout.pattern=[%d] %p %m (%c)%n',
      'rootLogger.level=WARN',
      'rootLogger.appenderRef.stdout.ref=STDOUT',
      '',
    ].join('\n'),
  );
  const jvm = [`-Dlog4j2.configurationFile=${log4j}`, '-cp', `${libs}/*`];
  mkdirSync(path.join(dir, 'data'));
  await run('java', [
    ...jvm,
    'kafka.tools.StorageTool',
    'format',
    '-t',
    newClusterId(),
    '-c',
    props,
    ...opts.users.flatMap((u) => ['--add-scram', `SCRAM-SHA-512=[name=${u.name},password=${u.password}]`]),
  ]);
  const logFile = path.join(dir, 'broker.log');
  const out = openSync(logFile, 'a');
  const child: ChildProcess = spawn('java', ['-Xms128m', '-Xmx512m', ...jvm, 'kafka.Kafka', props], {
    stdio: ['ignore', out, out],
  });
  // Listening once the broker has started (its listeners open last), or gone with its log.
  await waitFor(
    'the private Kafka broker',
    async () => {
      for (const p of [port, mtlsPort, ...(opts.plaintext ? [plainPort] : [])])
        if (!(await portOpen('127.0.0.1', p))) return false;
      return true;
    },
    120_000,
    () => child.exitCode === null,
  ).catch((e: Error) => {
    child.kill('SIGKILL');
    throw new Error(`${e.message}\n${readFileSync(logFile, 'utf8').split('\n').slice(-40).join('\n')}`);
  });
  const log = () =>
    existsSync(logFile) ? readFileSync(logFile, 'utf8').split('\n').slice(-40).join('\n') : '';
  return {
    bootstrap: `localhost:${port}`,
    port,
    mtlsBootstrap: `localhost:${mtlsPort}`,
    ...(opts.plaintext ? { plaintextBootstrap: `127.0.0.1:${plainPort}` } : {}),
    dir,
    log,
    async stop() {
      if (child.exitCode === null && child.signalCode === null) {
        const exited = new Promise<void>((r) => child.once('exit', () => r()));
        child.kill('SIGTERM');
        const t = setTimeout(() => child.kill('SIGKILL'), 10_000);
        await exited;
        clearTimeout(t);
      }
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
