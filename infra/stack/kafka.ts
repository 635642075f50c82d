// Apache Kafka 4 in KRaft mode (broker and controller in one JVM per node), from Maven jars: one
// node, or a three-node cluster (replication 3, min.insync.replicas 2) when KAFKA_BROKERS lists
// three loopback brokers.
import { randomBytes } from 'node:crypto';
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { splitHostPort } from '../../platform/config/endpoints.js';
import { ensureTopics, openKafka, withAdmin } from '../../platform/kafka/client.js';
import { kafkaBootstrap, loadKafkaSecurity } from '../../platform/kafka/client-properties.js';
import type { AclGrant } from '../../platform/kafka/port.js';
import { copyMavenDependencies } from './maven.js';
import { paths } from './paths.js';
import {
  clearPid,
  ourPid,
  portOpen,
  run,
  StackError,
  spawnDetached,
  tail,
  terminate,
  waitFor,
  which,
} from './proc.js';
import {
  fingerprintOf,
  isSecureStack,
  KAFKA_ADMIN,
  KAFKA_RODS,
  secureFiles,
  servedFingerprint,
  untilServing,
} from './secure.js';
import { manages, type Probe, type Service } from './service.js';

const NAME = 'kafka';
// Kafka's default, stated: each is a network processor with a TLS factory of its own (rotate()).
const NETWORK_THREADS = 3;
const POM = path.join(paths.root, 'infra', 'kafka', 'pom.xml');

function kafkaVersion(): string {
  const m = /<kafka\.version>([^<]+)</.exec(readFileSync(POM, 'utf8'));
  return m?.[1] ?? 'unknown';
}

/** One JVM of the local cluster: broker and controller in one process (KRaft combined mode). */
export interface KafkaNode {
  id: number;
  host: string;
  port: number;
  controllerPort: number;
  /** Its pid-file name (`kafka` for node 1, as a single-node stack has always used). */
  name: string;
  dataDir: string;
  /** The pid of this node's JVM, if it runs. */
  pid(): number | undefined;
}

/**
 * The nodes of the local cluster: one per loopback entry of KAFKA_BROKERS (three entries make the
 * three-broker cluster). Controller ports: RODS_KAFKA_CONTROLLER_PORTS (comma-separated, one per
 * node), or RODS_KAFKA_CONTROLLER_PORT for a single node, or each broker's port + 1.
 */
export function kafkaNodes(): KafkaNode[] {
  // KAFKA_BROKERS, else KAFKA_CLIENT_PROPERTIES' bootstrap.servers: where rods' clients go.
  const brokers = kafkaBootstrap().map((b) => splitHostPort(b));
  const listed = (process.env.RODS_KAFKA_CONTROLLER_PORTS ?? '')
    .split(',')
    .map((x) => x.trim())
    .filter(Boolean)
    .map(Number);
  return brokers.map(({ host, port }, i) => {
    const id = i + 1;
    const name = id === 1 ? NAME : `${NAME}-${id}`;
    const single = brokers.length === 1 ? process.env.RODS_KAFKA_CONTROLLER_PORT : undefined;
    const controllerPort = listed[i] ?? Number(single ?? port + 1);
    // Our broker is the JVM whose command line names this stack folder and this port, so a
    // process started for another endpoint is never taken for this one.
    const marker = `-Drods.stack=${paths.stack}:${port}`;
    return {
      id,
      host,
      port,
      controllerPort,
      name,
      dataDir: path.join(paths.data, name),
      pid: () => ourPid(name, marker),
    };
  });
}

interface QuorumState {
  leaderId?: number;
  leaderEpoch?: number;
}

/**
 * The node the KRaft quorum has elected controller, as the nodes' quorum-state files say (the
 * highest epoch wins); undefined when none says.
 */
export function activeController(nodes: KafkaNode[] = kafkaNodes()): number | undefined {
  let best: { leader: number; epoch: number } | undefined;
  for (const n of nodes) {
    const file = path.join(n.dataDir, '__cluster_metadata-0', 'quorum-state');
    if (!existsSync(file)) continue;
    try {
      // {"leaderId":2,"leaderEpoch":5,...} (older versions wrap it in "data").
      const raw = JSON.parse(readFileSync(file, 'utf8')) as QuorumState & { data?: QuorumState };
      const q = raw.data ?? raw;
      const leader = q.leaderId;
      const epoch = q.leaderEpoch ?? -1;
      if (typeof leader === 'number' && leader > 0 && (!best || epoch > best.epoch)) best = { leader, epoch };
    } catch {
      // being rewritten: the other nodes say
    }
  }
  return best?.leader;
}

export function kafkaService(): Service {
  const nodes = kafkaNodes();
  const first = nodes[0]!;
  const cluster = nodes.length >= 3;
  const home = path.join(paths.stack, 'kafka');
  const libs = path.join(home, 'libs');
  const propsFile = (n: KafkaNode) =>
    path.join(home, n.id === 1 ? 'server.properties' : `server-${n.id}.properties`);
  const log4jFile = path.join(home, 'log4j2.properties');
  const log = paths.log(NAME);
  const version = kafkaVersion();
  const stamp = path.join(libs, `.complete-${version}`);
  const secure = isSecureStack();
  const f = secureFiles(paths.stack);
  // Secured: the controllers talk in plaintext on loopback only (no client is pointed there).
  const controllerHost = (n: KafkaNode) => (secure ? '127.0.0.1' : n.host);
  const voters = nodes.map((n) => `${n.id}@${controllerHost(n)}:${n.controllerPort}`).join(',');
  const password = (user: string) =>
    /^password=(.*)$/m.exec(readFileSync(f.kafkaPassword(user), 'utf8'))?.[1] ?? '';
  /** The secured broker's listener settings: SASL_SSL only for clients, SCRAM, ACLs required. */
  const secureListeners = (n: KafkaNode) => [
    `listeners=SASL_SSL://${n.host}:${n.port},CONTROLLER://127.0.0.1:${n.controllerPort}`,
    `advertised.listeners=SASL_SSL://${n.host}:${n.port}`,
    'controller.listener.names=CONTROLLER',
    'inter.broker.listener.name=SASL_SSL',
    'listener.security.protocol.map=SASL_SSL:SASL_SSL,CONTROLLER:PLAINTEXT',
    'sasl.enabled.mechanisms=SCRAM-SHA-512',
    'sasl.mechanism.inter.broker.protocol=SCRAM-SHA-512',
    `listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required username="${KAFKA_ADMIN}" password="${password(KAFKA_ADMIN)}";`,
    'ssl.keystore.type=PEM',
    `ssl.keystore.location=${f.kafkaKeystore}`,
    'ssl.truststore.type=PEM',
    `ssl.truststore.location=${f.ca}`,
    'authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer',
    // The controller's principal on its loopback listener is ANONYMOUS.
    `super.users=User:${KAFKA_ADMIN};User:ANONYMOUS`,
    'allow.everyone.if.no.acl.found=false',
  ];
  // Three nodes or more: what a replicated production cluster runs (a record is acknowledged by
  // two replicas; one node may be lost, the controller included).
  const replicas = cluster ? 3 : 1;
  const minIsr = cluster ? 2 : 1;

  const writeConfig = (n: KafkaNode) => {
    mkdirSync(home, { recursive: true });
    writeFileSync(
      propsFile(n),
      [
        '# generated by infra/stack/kafka.ts; edits are overwritten',
        'process.roles=broker,controller',
        `node.id=${n.id}`,
        `controller.quorum.voters=${voters}`,
        ...(secure
          ? secureListeners(n)
          : [
              `listeners=PLAINTEXT://${n.host}:${n.port},CONTROLLER://${n.host}:${n.controllerPort}`,
              `advertised.listeners=PLAINTEXT://${n.host}:${n.port}`,
              'controller.listener.names=CONTROLLER',
              'inter.broker.listener.name=PLAINTEXT',
              'listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT',
            ]),
        `log.dirs=${n.dataDir}`,
        `num.network.threads=${NETWORK_THREADS}`,
        'num.partitions=1',
        `default.replication.factor=${replicas}`,
        `min.insync.replicas=${minIsr}`,
        `offsets.topic.replication.factor=${replicas}`,
        'offsets.topic.num.partitions=10',
        `transaction.state.log.replication.factor=${replicas}`,
        `transaction.state.log.min.isr=${minIsr}`,
        'transaction.state.log.num.partitions=10',
        'group.initial.rebalance.delay.ms=0',
        'auto.create.topics.enable=false',
        'log.retention.hours=-1',
        'message.max.bytes=10485760',
        'replica.fetch.max.bytes=10485760',
        '',
      ].join('\n'),
      // It holds the admin's password when secured.
      { mode: 0o600 },
    );
    // Kafka 4 logs through log4j2 (properties format: no extra parser on the classpath).
    writeFileSync(
      log4jFile,
      [
        'appender.stdout.type=Console',
        'appender.stdout.name=STDOUT',
        'appender.stdout.layout.type=PatternLayout',
        'appender.stdout.layout.pattern=[%d] %p %m (%c)%n',
        'rootLogger.level=INFO',
        'rootLogger.appenderRef.stdout.ref=STDOUT',
        'logger.state.name=state.change.logger',
        'logger.state.level=WARN',
        'logger.cleaner.name=kafka.log.LogCleaner',
        'logger.cleaner.level=WARN',
        '',
      ].join('\n'),
    );
  };

  const java = (main: string, args: string[], jvm: string[] = []) => [
    ...jvm,
    `-Dlog4j2.configurationFile=${log4jFile}`,
    `-Dkafka.logs.dir=${paths.logs}`,
    '-cp',
    `${libs}/*`,
    main,
    ...args,
  ];

  const probe = async (): Promise<Probe> => {
    try {
      const c = await withAdmin((a) => a.describeCluster(), {
        clientId: 'rods-stack-probe',
        retries: 0,
        quiet: true,
      });
      return {
        answering: true,
        detail: `cluster ${c.clusterId}, ${c.brokers.length} of ${nodes.length} broker(s)`,
      };
    } catch (e) {
      return { answering: false, detail: (e as Error).message };
    }
  };

  /** The cluster id every node is formatted with (one cluster), made once. */
  const clusterIdFile = path.join(home, 'cluster-id');
  const clusterId = () => {
    if (existsSync(clusterIdFile)) return readFileSync(clusterIdFile, 'utf8').trim();
    // A single-node stack formatted before this file existed keeps its own id.
    const meta = path.join(first.dataDir, 'meta.properties');
    const known = existsSync(meta) ? /cluster\.id=(\S+)/.exec(readFileSync(meta, 'utf8'))?.[1] : undefined;
    const id = known ?? newClusterId();
    mkdirSync(home, { recursive: true });
    writeFileSync(clusterIdFile, `${id}\n`);
    return id;
  };

  /** Starts one node (formatting its storage the first time); does not wait for it. */
  const startNode = async (n: KafkaNode): Promise<number> => {
    writeConfig(n);
    if (!existsSync(path.join(n.dataDir, 'meta.properties'))) {
      mkdirSync(n.dataDir, { recursive: true });
      await run(
        'java',
        java('kafka.tools.StorageTool', [
          'format',
          '-t',
          clusterId(),
          '-c',
          propsFile(n),
          '--ignore-formatted',
          // Secured: the SCRAM credentials are written with the cluster's first metadata.
          ...(secure
            ? [KAFKA_ADMIN, KAFKA_RODS].flatMap((u) => [
                '--add-scram',
                `SCRAM-SHA-512=[name=${u},password=${password(u)}]`,
              ])
            : []),
        ]),
      ).catch((e: Error & { stdout?: string; stderr?: string }) => {
        throw new StackError(`formatting Kafka storage failed: ${e.stderr ?? e.stdout ?? e.message}`, n.name);
      });
    }
    const heap = process.env.RODS_KAFKA_HEAP ?? (cluster ? '512m' : '1g');
    return spawnDetached(
      n.name,
      'java',
      java(
        'kafka.Kafka',
        [propsFile(n)],
        [
          `-Drods.stack=${paths.stack}:${n.port}`,
          `-Xms256m`,
          `-Xmx${heap}`,
          '-XX:+UseG1GC',
          '-Djava.awt.headless=true',
        ],
      ),
    );
  };

  /**
   * Starts the nodes that do not run and waits until every one listens and is in the cluster. A
   * node killed seconds ago is still registered (its broker session has not expired), so the
   * metadata alone would call a node ready that does not listen yet.
   */
  const startMissing = async (): Promise<number> => {
    const started: KafkaNode[] = [];
    for (const n of nodes)
      if (!n.pid()) {
        await startNode(n);
        started.push(n);
      }
    if (started.length === 0) return 0;
    await waitFor(
      'kafka',
      async () => {
        const c = await withAdmin((a) => a.describeCluster(), {
          clientId: 'rods-stack-probe',
          retries: 0,
          quiet: true,
        }).catch(() => undefined);
        if (c === undefined || !started.every((n) => c.brokers.some((b) => b.nodeId === n.id))) return false;
        for (const n of started) if (!(await portOpen(n.host, n.port))) return false;
        return true;
      },
      180_000,
      () => started.every((n) => n.pid() !== undefined),
    ).catch((e) => {
      const logs = started
        .map((n) => `--- tail of ${paths.log(n.name)} ---\n${tail(paths.log(n.name))}`)
        .join('\n');
      throw new StackError(`${(e as Error).message}\n${logs}`, NAME);
    });
    return started.length;
  };

  return {
    name: NAME,
    endpoint: nodes.map((n) => `${n.host}:${n.port}`).join(','),
    managed: nodes.every((n) => manages(n.host, NAME)),
    port: first.port,
    log,
    async install() {
      if (!(await which('java'))) {
        throw new StackError(
          '`java` is not on PATH; install it with `apt-get install -y openjdk-17-jre-headless`',
          NAME,
        );
      }
      if (existsSync(stamp)) return;
      console.log(`[kafka] resolving Kafka ${version} jars with Maven (cached in ${libs}) ...`);
      await copyMavenDependencies(POM, libs, `the Kafka ${version} jars`).catch((e: Error) => {
        throw new StackError(e.message, NAME);
      });
      writeFileSync(stamp, `${new Date().toISOString()}\n`);
    },
    // The cluster's pid is its first node's (a node that died is started again by ready()).
    pid: () => first.pid(),
    async start() {
      await startMissing();
    },
    async ready() {
      // A node of the cluster that died is started again while the others answer.
      const restarted = this.managed ? await startMissing() : 0;
      // The local stack owns its cluster: a topic an older version made with other settings is set
      // right. Secured: the admin makes them and grants rods' principal its own resources only.
      const admin = secure
        ? { security: loadKafkaSecurity({ KAFKA_CLIENT_PROPERTIES: f.kafkaAdminProperties }) }
        : {};
      const r = await withAdmin(
        async (a) => {
          const topics = await ensureTopics(a, undefined, { fix: true });
          if (secure) await a.createAcls(rodsAcls(`User:${KAFKA_RODS}`));
          return topics;
        },
        { clientId: 'rods-stack', ...admin },
      );
      if (secure) await untilRodsMayProduce(f.kafkaRodsProperties);
      const topics =
        r.created.length > 0
          ? `created topics ${r.created.join(', ')}`
          : `${r.existing.length} topics present`;
      return restarted > 0 ? `started ${restarted} node(s) that were down; ${topics}` : topics;
    },
    probe,
    async rotate() {
      // The keystore file was rewritten in place. Setting its location to the same value makes
      // each broker reload it: for a broker resource the controller writes the config record even
      // when the value is unchanged (KAFKA-14136; ConfigurationControlManager, "generate records
      // even if the value is unchanged to trigger reloads on the brokers"), and the broker's SSL
      // factory is rebuilt because the file changed. Existing connections keep their session.
      const expected = fingerprintOf(f.serverCert);
      const up = nodes.filter((n) => n.pid());
      await withAdmin(
        (a) =>
          a.alterBrokerConfigs(
            Object.fromEntries(
              up.map((n) => [
                String(n.id),
                { 'listener.name.sasl_ssl.ssl.keystore.location': f.kafkaKeystore },
              ]),
            ),
          ),
        {
          clientId: 'rods-stack-rotate',
          security: loadKafkaSecurity({ KAFKA_CLIENT_PROPERTIES: f.kafkaAdminProperties }),
        },
      );
      // Every network processor of the node must have reloaded: twice as many connections in a
      // row as there are processors (handed out round-robin) present the new certificate.
      for (const n of up)
        await untilServing(`Kafka node ${n.id}`, () => servedFingerprint(n.host, n.port), expected, {
          consecutive: 2 * NETWORK_THREADS,
        });
      return `${up.length} node(s) reloaded their keystore and present ${expected.slice(0, 11)}`;
    },
    async stop() {
      let any = false;
      // All nodes at once: one by one, the last ones would wait for a quorum that is gone.
      await Promise.all(
        nodes.map(async (n) => {
          const pid = n.pid();
          if (pid) {
            await terminate(pid, 30_000);
            any = true;
          }
          clearPid(n.name);
        }),
      );
      return any;
    },
  };
}

/**
 * Waits until rods' principal can open an idempotent producer: the brokers apply new ACLs from
 * the metadata log a moment after the controller accepts them, and a process started right after
 * `up` would be refused. Each attempt is bounded (an attempt that hangs must not hang `up`).
 */
async function untilRodsMayProduce(properties: string): Promise<void> {
  const security = loadKafkaSecurity({ KAFKA_CLIENT_PROPERTIES: properties });
  const deadline = Date.now() + 60_000;
  let last = '';
  while (Date.now() < deadline) {
    let timer: NodeJS.Timeout | undefined;
    // kafkajs' idempotent producer asks for a producer id on connect (InitProducerId).
    const attempt = openKafka({ clientId: 'rods-stack-check', security, quiet: true, retries: 2 }).producer();
    // Closed whenever it connects, also after this attempt gave up on it: an open producer keeps
    // `up` from exiting.
    attempt.then((p) => p.disconnect()).catch(() => undefined);
    try {
      await Promise.race([
        attempt,
        new Promise((_, reject) => {
          timer = setTimeout(() => reject(new Error('no answer within 15 s')), 15_000);
        }),
      ]);
      return;
    } catch (e) {
      last = (e as Error).message;
    } finally {
      clearTimeout(timer);
    }
    await new Promise((r) => setTimeout(r, 500));
  }
  throw new StackError(
    `User:${KAFKA_RODS} still cannot open an idempotent producer a minute after its ACLs were granted (${last}); check the cluster's IdempotentWrite ACL with kafka-acls.sh --list`,
    NAME,
  );
}

/**
 * What rods' principal needs, and no more: every operation on the topics named `rods.*`, on the
 * consumer groups and on the transactional ids named `rods*` (the relay's transactions), and
 * IdempotentWrite on the cluster: kafkajs asks for a producer id with InitProducerId v0, which
 * the broker authorizes as IdempotentWrite on the cluster, not through a transactional id.
 */
export function rodsAcls(principal: string): AclGrant[] {
  return [
    {
      principal,
      resource: 'cluster',
      name: 'kafka-cluster',
      pattern: 'literal',
      operation: 'idempotent-write',
    },
    { principal, resource: 'topic', name: 'rods.', pattern: 'prefixed', operation: 'all' },
    { principal, resource: 'group', name: 'rods', pattern: 'prefixed', operation: 'all' },
    { principal, resource: 'transactional-id', name: 'rods', pattern: 'prefixed', operation: 'all' },
  ];
}

/**
 * A Kafka cluster id: 16 random bytes in base64url, as Kafka's own Uuid makes them. Like Kafka,
 * draw again when the id starts with '-': the storage tool's argument parser would read it as
 * an option and refuse to format (1 start in 64 did, and failed a CI run).
 */
export function newClusterId(random: (n: number) => Buffer = randomBytes): string {
  for (;;) {
    const id = random(16).toString('base64url');
    if (!id.startsWith('-')) return id;
  }
}
