// The kafkajs adapter of the Kafka port (platform/kafka/port.ts): the only code that imports kafkajs.
// kafkajs is no longer maintained; replacing it means another folder beside this one that
// passes the same tests (platform/kafka/README.md).
import kafkajs, {
  type Admin,
  type IHeaders,
  Kafka,
  type KafkaConfig,
  type KafkaMessage,
  logLevel,
} from 'kafkajs';
import {
  type KafkaSecurity,
  kafkaBootstrap,
  loadKafkaSecurity,
  oauthTokenFromFile,
} from '../../client-properties.js';
import type {
  AclGrant,
  BatchConsumer,
  BatchConsumerOptions,
  BatchHandler,
  ClusterInfo,
  CommittedOffset,
  ConsumedRecord,
  GroupOffset,
  KafkaClient,
  KafkaOptions,
  PartitionOffsets,
  ProducerOptions,
  RecordProducer,
  TopicAdmin,
  Transaction,
  TransactionalProducer,
  TransactionalProducerOptions,
} from '../../port.js';
import { KafkaAuthorizationError } from '../../port.js';
import type { TopicSpec } from '../../topology.js';
import { routedLogCreator } from './log.js';
import { partitionerFor, sendAll } from './send.js';

/**
 * Partition counts per topic, read with an admin once per client. A count is taken only from
 * complete metadata (partitions 0..n-1, each with a leader): a partial or empty answer (a topic
 * still being created) would send a key to another partition than every other client does, and
 * the aggregator relies on one task, one partition.
 */
function partitionCounts(k: Kafka): (topic: string) => Promise<number> {
  const cache = new Map<string, Promise<number>>();
  const read = async (topic: string): Promise<number> => {
    const admin = k.admin();
    await admin.connect();
    try {
      for (let attempt = 0; ; attempt++) {
        const { topics } = await admin.fetchTopicMetadata({ topics: [topic] });
        const parts = topics.find((t) => t.name === topic)?.partitions ?? [];
        const ids = parts.map((p) => p.partitionId).sort((a, b) => a - b);
        const complete =
          ids.length > 0 && ids.every((id, i) => id === i) && parts.every((p) => p.leader >= 0);
        if (complete) return ids.length;
        if (attempt >= 50)
          throw new Error(
            `topic ${topic}: no complete partition metadata after 10 s (${ids.length} partitions, ${parts.filter((p) => p.leader < 0).length} without a leader)`,
          );
        await new Promise((r) => setTimeout(r, 200));
      }
    } finally {
      await admin.disconnect();
    }
  };
  return (topic) => {
    let n = cache.get(topic);
    if (!n) {
      n = read(topic);
      n.catch(() => cache.delete(topic)); // a failed read is tried again by the next send
      cache.set(topic, n);
    }
    return n;
  };
}

/** A send that left partitions out (kafkajs' retry: send.ts) is logged as it is repaired. */
const resent = (missing: number[]) =>
  routedLogCreator(logLevel.WARN)({
    namespace: 'Producer',
    level: logLevel.WARN,
    label: 'WARN',
    log: {
      message: `a send resolved without partitions ${missing.join(', ')}; sending their records again`,
      timestamp: new Date().toISOString(),
      logger: 'kafkajs',
    },
  });

/** TLS and SASL in kafkajs' terms (its socket is Node's tls.connect with these options). */
export function kafkajsSecurity(s: KafkaSecurity): Pick<KafkaConfig, 'ssl' | 'sasl'> {
  const out: Pick<KafkaConfig, 'ssl' | 'sasl'> = {};
  if (s.tls) {
    const t = s.tls;
    out.ssl = {
      ...(t.ca !== undefined ? { ca: t.ca } : {}),
      ...(t.cert !== undefined ? { cert: t.cert, key: t.key } : {}),
      ...(t.passphrase !== undefined ? { passphrase: t.passphrase } : {}),
      // ssl.endpoint.identification.algorithm= (empty): the chain is checked, not the name.
      ...(t.verifyHostname ? {} : { checkServerIdentity: () => undefined }),
    };
  }
  if (s.sasl) {
    const a = s.sasl;
    if (a.mechanism === 'OAUTHBEARER')
      out.sasl = { mechanism: 'oauthbearer', oauthBearerProvider: oauthTokenFromFile(a.tokenFile) };
    else if (a.mechanism === 'PLAIN')
      out.sasl = { mechanism: 'plain', username: a.username, password: a.password };
    else if (a.mechanism === 'SCRAM-SHA-256')
      out.sasl = { mechanism: 'scram-sha-256', username: a.username, password: a.password };
    else out.sasl = { mechanism: 'scram-sha-512', username: a.username, password: a.password };
  }
  return out;
}

/** A kafkajs-backed client: allowAutoTopicCreation is always off (topics come from platform/kafka/topology.ts). */
export function kafkajsClient(opts: KafkaOptions = {}): KafkaClient {
  const security = opts.security ?? loadKafkaSecurity();
  const k = new Kafka({
    clientId: opts.clientId ?? 'rods',
    brokers: opts.brokers ?? kafkaBootstrap(process.env, security),
    ...kafkajsSecurity(security),
    logLevel: opts.quiet ? logLevel.NOTHING : logLevel.ERROR,
    logCreator: routedLogCreator,
    retry: { retries: opts.retries ?? 8, initialRetryTime: 200 },
    // A probe (no retries) must answer quickly.
    connectionTimeout: opts.retries === 0 ? 1500 : 5000,
  });
  const partitions = { count: partitionCounts(k), choose: partitionerFor() };
  return {
    async producer(p: ProducerOptions = {}) {
      const idempotent = p.idempotent ?? true;
      const producer = k.producer({
        allowAutoTopicCreation: false,
        ...(idempotent ? { idempotent: true, maxInFlightRequests: 1 } : {}),
      });
      await connectOrClose(producer, () => producer.connect());
      const acks = idempotent || p.acks !== 'leader' ? -1 : 1;
      return {
        send: (topic, records) => sendAll(producer, topic, records, acks, partitions, resent),
        disconnect: () => producer.disconnect(),
      } satisfies RecordProducer;
    },
    async transactionalProducer(t: TransactionalProducerOptions) {
      const producer = k.producer({
        allowAutoTopicCreation: false,
        transactionalId: t.transactionalId,
        idempotent: true,
        maxInFlightRequests: 1,
        transactionTimeout: t.transactionTimeoutMs ?? 60_000,
      });
      // kafkajs sends the transactional InitProducerId only with the first transaction, not on
      // connect; an empty transaction forces it now, so older instances are fenced (and their
      // open transaction completed or aborted) before the caller reads anything back.
      await connectOrClose(producer, async () => {
        await producer.connect();
        await (await producer.transaction()).abort();
      });
      return {
        async transaction(): Promise<Transaction> {
          const tx = await producer.transaction();
          return {
            send: (topic, records) => sendAll(tx, topic, records, -1, partitions, resent),
            async sendOffsets(groupId: string, offsets: GroupOffset[]) {
              await tx.sendOffsets({ consumerGroupId: groupId, topics: byTopic(offsets) });
            },
            commit: () => tx.commit(),
            abort: () => tx.abort(),
          };
        },
        disconnect: () => producer.disconnect(),
      } satisfies TransactionalProducer;
    },
    batchConsumer: (c) => batchConsumer(k, c),
    async admin() {
      const admin = k.admin();
      await connectOrClose(admin, () => admin.connect());
      return topicAdmin(admin);
    },
  };
}

/**
 * Runs a client's connect and closes the client when it fails: kafkajs keeps the broker
 * connections it opened before the failing step (an idempotent producer's refused
 * InitProducerId, say), and they would keep the process alive.
 */
async function connectOrClose(
  client: { disconnect(): Promise<void> },
  connect: () => Promise<void>,
): Promise<void> {
  try {
    await connect();
  } catch (e) {
    // Bounded: a disconnect can wait on brokers that are gone, and the failure must still surface.
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([
      client.disconnect().catch(() => undefined),
      new Promise((resolve) => {
        timer = setTimeout(resolve, 5_000);
      }),
    ]).finally(() => clearTimeout(timer));
    throw e;
  }
}

/** kafkajs' offset commit shape; metadata passes through to the broker (typed away by kafkajs). */
function byTopic(offsets: GroupOffset[]) {
  const topics = new Map<string, { partition: number; offset: string; metadata?: string }[]>();
  for (const o of offsets) {
    const list = topics.get(o.topic) ?? [];
    list.push({
      partition: o.partition,
      offset: o.offset,
      ...(o.metadata !== undefined ? { metadata: o.metadata } : {}),
    });
    topics.set(o.topic, list);
  }
  return [...topics].map(([topic, partitions]) => ({ topic, partitions }));
}

function headersOf(h: IHeaders | undefined): Record<string, Buffer> {
  const out: Record<string, Buffer> = {};
  for (const [name, v] of Object.entries(h ?? {})) {
    const last = Array.isArray(v) ? v[v.length - 1] : v;
    if (last !== undefined) out[name] = Buffer.isBuffer(last) ? last : Buffer.from(last);
  }
  return out;
}

function recordOf(m: KafkaMessage): ConsumedRecord {
  return {
    offset: m.offset,
    key: m.key ?? null,
    value: m.value ?? null,
    headers: headersOf(m.headers),
    timestamp: m.timestamp,
  };
}

export function batchConsumer(k: Kafka, o: BatchConsumerOptions): BatchConsumer {
  const session = o.sessionTimeoutMs ?? 30_000;
  const c = k.consumer({
    groupId: o.groupId,
    allowAutoTopicCreation: false,
    readUncommitted: o.readCommitted === false,
    sessionTimeout: session,
    rebalanceTimeout: o.rebalanceTimeoutMs ?? 60_000,
    heartbeatInterval: o.heartbeatIntervalMs ?? 3000,
    ...(o.maxBytesPerPartition !== undefined ? { maxBytesPerPartition: o.maxBytesPerPartition } : {}),
    ...(o.maxWaitMs !== undefined ? { maxWaitTimeInMs: o.maxWaitMs } : {}),
  });
  if (o.onAssigned) {
    const onAssigned = o.onAssigned;
    c.on(c.events.GROUP_JOIN, async (e) => {
      const assignment = Object.entries(e.payload.memberAssignment).map(([topic, partitions]) => ({
        topic,
        partitions: [...partitions],
      }));
      await onAssigned(assignment);
    });
  }
  const onPosition = o.onPosition;
  const after = (offset: string) => String(BigInt(offset) + 1n);
  if (onPosition) {
    // kafkajs does not call eachBatch for a batch of markers or aborted records only; it reports
    // it to the instrumentation events, with no records.
    c.on(c.events.END_BATCH_PROCESS, (e) => {
      if (e.payload.batchSize === 0)
        onPosition(e.payload.topic, e.payload.partition, after(e.payload.lastOffset));
    });
  }
  const start = async (handler: BatchHandler) => {
    await c.connect();
    await c.subscribe({ topics: o.topics, fromBeginning: o.fromBeginning ?? true });
    await c.run({
      autoCommit: false,
      // Resolved below only when the handler returned: a stopped or stale batch comes again.
      eachBatchAutoResolve: false,
      partitionsConsumedConcurrently: o.concurrency ?? 1,
      eachBatch: async ({ batch, heartbeat, resolveOffset, isRunning, isStale }) => {
        if (!isRunning() || isStale()) return;
        if (batch.messages.length > 0) {
          const high = batch.highWatermark;
          const last = batch.messages[batch.messages.length - 1]!;
          await handler(
            {
              topic: batch.topic,
              partition: batch.partition,
              records: batch.messages.map(recordOf),
              highWatermark: high,
              lag: Math.max(0, Number(BigInt(high) - BigInt(last.offset) - 1n)),
            },
            { heartbeat, isRunning, isStale },
          );
          if (!isRunning() || isStale()) return;
        }
        // The batch's last offset, past any transaction marker after the last record.
        resolveOffset(batch.lastOffset());
        onPosition?.(batch.topic, batch.partition, after(batch.lastOffset()));
        await heartbeat();
      },
    });
  };
  // kafkajs restarts a crashed consumer only after errors it deems retriable; after others (no
  // group coordinator while the broker restarts, a connection refused after its retries) it
  // disconnects for good. A consumer that runs for weeks starts again, with backoff, until
  // disconnect() is called: the group then resumes from its committed offsets.
  let stopping = false;
  let restart: (() => Promise<void>) | undefined;
  c.on(c.events.CRASH, (e) => {
    if (e.payload.restart || stopping || !restart) return;
    const again = (attempt: number) =>
      setTimeout(
        () => {
          if (!stopping) restart!().catch(() => again(attempt + 1));
        },
        Math.min(30_000, 1000 * 2 ** Math.min(attempt, 5)),
      );
    again(0);
  });
  return {
    async run(handler: BatchHandler) {
      restart = () => start(handler);
      await start(handler);
    },
    async commit(offsets: GroupOffset[]) {
      await c.commitOffsets(
        offsets.map((x) => ({
          topic: x.topic,
          partition: x.partition,
          offset: x.offset,
          ...(x.metadata !== undefined ? { metadata: x.metadata } : {}),
        })),
      );
    },
    seek: (topic, partition, offset) => c.seek({ topic, partition, offset }),
    pause: (topic, partitions) => c.pause([{ topic, partitions }]),
    resume: (topic, partitions) => c.resume([{ topic, partitions }]),
    disconnect: () => {
      stopping = true;
      return c.disconnect();
    },
  };
}

// Group coordinator errors that pass once the coordinator has moved or finished loading (a busy
// or restarting broker); kafkajs's admin throws them at once on an offset fetch.
// (kafkajs's names for Kafka's error codes 14, 15 and 16.)
const COORDINATOR_MOVING = new Set([
  'NOT_COORDINATOR_FOR_GROUP',
  'GROUP_LOAD_IN_PROGRESS',
  'GROUP_COORDINATOR_NOT_AVAILABLE',
]);

// A new topic's metadata reaches every broker a moment after the create returns: until then a
// metadata request answers "unknown topic" or "no leader" (kafkajs's own waitForLeaders gives up
// at once on the first, which failed test setup on a busy CI machine).
const TOPIC_PROPAGATING = new Set(['UNKNOWN_TOPIC_OR_PARTITION', 'LEADER_NOT_AVAILABLE']);

// A partition whose leadership is moving or not yet taken (a new topic, a restarting broker).
const LEADER_MOVING = new Set([
  'NOT_LEADER_FOR_PARTITION',
  'LEADER_NOT_AVAILABLE',
  'UNKNOWN_TOPIC_OR_PARTITION',
]);

/** Runs f again (with a capped backoff) while it throws a Kafka error whose type is in `passing`. */
async function retryWhile<T>(passing: Set<string>, f: () => Promise<T>, attempts = 6): Promise<T> {
  for (let i = 1; ; i++) {
    try {
      return await f();
    } catch (e) {
      if (i >= attempts || !passing.has((e as { type?: string }).type ?? '')) throw e;
      await new Promise((r) => setTimeout(r, Math.min(100 * 2 ** i, 2_000)));
    }
  }
}

/** The *_AUTHORIZATION_FAILED code anywhere in a kafkajs error (wrapped in retries or aggregates). */
export function authorizationCode(e: unknown, depth = 0): string | undefined {
  if (!e || typeof e !== 'object' || depth > 5) return undefined;
  const err = e as { type?: string; cause?: unknown; originalError?: unknown; errors?: unknown[] };
  if (err.type?.endsWith('_AUTHORIZATION_FAILED')) return err.type;
  for (const inner of [err.cause, err.originalError, ...(Array.isArray(err.errors) ? err.errors : [])]) {
    const c = authorizationCode(inner, depth + 1);
    if (c) return c;
  }
  return undefined;
}

/** Runs f; an authorization refusal becomes the port's KafkaAuthorizationError naming `operation`. */
async function authorized<T>(operation: string, f: () => Promise<T>): Promise<T> {
  try {
    return await f();
  } catch (e) {
    const code = authorizationCode(e);
    if (code) throw new KafkaAuthorizationError(operation, code);
    throw e;
  }
}

// A CommonJS export Node's ESM loader does not see by name.
const { ConfigResourceTypes, AclOperationTypes, AclPermissionTypes, AclResourceTypes, ResourcePatternTypes } =
  kafkajs;

/** A grant in kafkajs' terms (any host). */
function kafkajsAcl(g: AclGrant) {
  const resource = {
    topic: AclResourceTypes.TOPIC,
    group: AclResourceTypes.GROUP,
    'transactional-id': AclResourceTypes.TRANSACTIONAL_ID,
    cluster: AclResourceTypes.CLUSTER,
  }[g.resource];
  const operation = {
    all: AclOperationTypes.ALL,
    read: AclOperationTypes.READ,
    write: AclOperationTypes.WRITE,
    describe: AclOperationTypes.DESCRIBE,
    'describe-configs': AclOperationTypes.DESCRIBE_CONFIGS,
    create: AclOperationTypes.CREATE,
    'idempotent-write': AclOperationTypes.IDEMPOTENT_WRITE,
  }[g.operation];
  return {
    resourceType: resource,
    resourceName: g.name,
    resourcePatternType:
      g.pattern === 'prefixed' ? ResourcePatternTypes.PREFIXED : ResourcePatternTypes.LITERAL,
    principal: g.principal,
    host: '*',
    operation,
    permissionType: AclPermissionTypes.ALLOW,
  };
}

export function topicAdmin(a: Admin): TopicAdmin {
  return {
    listTopics: () => a.listTopics(),
    async createTopics(specs: TopicSpec[]) {
      if (specs.length === 0) return;
      await authorized(`creating topics ${specs.map((t) => t.name).join(', ')}`, () =>
        a.createTopics({
          waitForLeaders: false,
          topics: specs.map((s) => ({
            topic: s.name,
            numPartitions: s.partitions,
            replicationFactor: s.replicationFactor,
            configEntries: Object.entries(s.config).map(([name, value]) => ({ name, value })),
          })),
        }),
      );
      const topics = specs.map((s) => s.name);
      await retryWhile(
        TOPIC_PROPAGATING,
        async () => {
          const md = await a.fetchTopicMetadata({ topics });
          const leaderless = md.topics.find(
            (t) => t.partitions.length === 0 || t.partitions.some((p) => p.leader < 0),
          );
          if (leaderless) {
            throw Object.assign(new Error(`topic ${leaderless.name} has no leader yet`), {
              type: 'LEADER_NOT_AVAILABLE',
            });
          }
        },
        20,
      );
    },
    async deleteTopics(topics: string[]) {
      // kafkajs retries and then fails on an unknown topic: delete only those that exist.
      const existing = new Set(await a.listTopics());
      const present = topics.filter((t) => existing.has(t));
      if (present.length > 0) await a.deleteTopics({ topics: present });
    },
    async describeTopicConfigs(topics: string[]) {
      if (topics.length === 0) return {};
      const r = await authorized(`describing the configs of topics ${topics.join(', ')}`, () =>
        a.describeConfigs({
          includeSynonyms: false,
          resources: topics.map((name) => ({ type: ConfigResourceTypes.TOPIC, name })),
        }),
      );
      return Object.fromEntries(
        r.resources.map((res) => [
          res.resourceName,
          Object.fromEntries(res.configEntries.map((e) => [e.configName, e.configValue])),
        ]),
      );
    },
    async alterTopicConfigs(changes: Record<string, Record<string, string>>) {
      const resources = Object.entries(changes).map(([name, config]) => ({
        type: ConfigResourceTypes.TOPIC,
        name,
        configEntries: Object.entries(config).map(([n, value]) => ({ name: n, value })),
      }));
      // kafkajs offers no incremental change: alterConfigs replaces a topic's non-default
      // entries, so those it has are sent along with the change.
      if (resources.length === 0) return;
      const current = await a.describeConfigs({
        includeSynonyms: false,
        resources: resources.map((r) => ({ type: r.type, name: r.name })),
      });
      const kept = new Map(
        current.resources.map((res) => [
          res.resourceName,
          Object.fromEntries(
            res.configEntries
              .filter((e) => !e.isDefault && !e.readOnly)
              .map((e) => [e.configName, e.configValue]),
          ),
        ]),
      );
      await a.alterConfigs({
        validateOnly: false,
        resources: resources.map((res) => ({
          ...res,
          configEntries: Object.entries({ ...(kept.get(res.name) ?? {}), ...changes[res.name] }).map(
            ([name, value]) => ({ name, value }),
          ),
        })),
      });
    },
    async alterBrokerConfigs(changes: Record<string, Record<string, string>>) {
      const resources = Object.entries(changes).map(([id, config]) => ({
        type: ConfigResourceTypes.BROKER,
        name: id,
        configEntries: Object.entries(config).map(([name, value]) => ({ name, value })),
      }));
      if (resources.length > 0) await a.alterConfigs({ validateOnly: false, resources });
    },
    async createAcls(grants: AclGrant[]) {
      if (grants.length > 0) await a.createAcls({ acl: grants.map(kafkajsAcl) });
    },
    async describeCluster(): Promise<ClusterInfo> {
      const c = await a.describeCluster();
      return {
        clusterId: c.clusterId,
        controllerId: c.controller,
        brokers: c.brokers.map((b) => ({ nodeId: b.nodeId, host: b.host, port: b.port })),
      };
    },
    async fetchTopicOffsets(topic: string): Promise<PartitionOffsets[]> {
      // A partition's leader may still be taking over just after the topic was created.
      const offsets = await retryWhile(LEADER_MOVING, () => a.fetchTopicOffsets(topic), 10);
      return offsets
        .map((p) => ({ partition: p.partition, low: p.low, high: p.high }))
        .sort((x, y) => x.partition - y.partition);
    },
    async fetchCommittedOffsets(groupId: string, topic: string): Promise<CommittedOffset[]> {
      const r = await retryWhile(COORDINATOR_MOVING, () => a.fetchOffsets({ groupId, topics: [topic] }));
      return (r[0]?.partitions ?? [])
        .map((p) => ({
          partition: p.partition,
          // kafkajs reports "-1" for a partition the group never committed.
          offset: Number(p.offset) < 0 ? null : p.offset,
          metadata: p.metadata || null,
        }))
        .sort((x, y) => x.partition - y.partition);
    },
    disconnect: () => a.disconnect(),
  };
}
