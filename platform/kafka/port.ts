// The Kafka port: what the project needs from a Kafka client, in its own terms and with plain
// types. Only an adapter (platform/kafka/adapters/<client>/) talks to a client library; everything else
// uses these interfaces through platform/kafka/client.ts. The contract (delivery, offsets, transactions,
// rebalances) and what a second adapter must pass are in platform/kafka/README.md.
import type { KafkaSecurity } from './client-properties.js';
import type { TopicSpec } from './topology.js';

/**
 * Kafka offsets are 64-bit: they travel as decimal strings. An offset stored or committed for a
 * partition is always the NEXT offset to read (the last processed record's offset + 1).
 */
export type Offset = string;

/** A record to produce. A string key or value is sent as its UTF-8 bytes. */
export interface OutgoingRecord {
  /** Decides the partition (same key, same partition, same order) unless `partition` is given. */
  key?: Buffer | string | null;
  /** null is a tombstone. */
  value: Buffer | string | null;
  headers?: Record<string, Buffer | string>;
  /** Explicit partition; by default the client's key hash (murmur2, as the Java client). */
  partition?: number;
}

/** Where the broker put (the first record of) a send to one partition. */
export interface SentBatch {
  topic: string;
  partition: number;
  /** Offset of the first record of this send in the partition; absent inside a transaction on some clients. */
  baseOffset?: Offset;
}

/** A consumed record. */
export interface ConsumedRecord {
  offset: Offset;
  key: Buffer | null;
  value: Buffer | null;
  /** Header values as bytes (the last value when a header repeats). */
  headers: Record<string, Buffer>;
  /** Record timestamp, milliseconds since the epoch, as a decimal string. */
  timestamp: string;
}

/**
 * The broker refused a send because a record (or a partition's batch of them) is over the
 * topic's size limit (message.max.bytes / max.message.bytes). Sending it again cannot succeed:
 * make it smaller. Inside a transaction the transaction must be aborted.
 */
export class RecordTooLargeError extends Error {
  override name = 'RecordTooLargeError';
}

/**
 * The broker refused the principal an operation (an ACL is missing: TOPIC_AUTHORIZATION_FAILED,
 * CLUSTER_AUTHORIZATION_FAILED, GROUP_AUTHORIZATION_FAILED ...). `operation` says what rods tried.
 */
export class KafkaAuthorizationError extends Error {
  override name = 'KafkaAuthorizationError';
  constructor(
    readonly operation: string,
    readonly code: string,
  ) {
    super(`Kafka refused ${operation}: ${code} (the principal lacks an ACL)`);
  }
}

/** Anything that can send records: a producer or an open transaction. */
export interface RecordSender {
  /**
   * Sends records to one topic and resolves once every in-sync replica has them (acks=all),
   * unless the producer was opened with `acks: 'leader'`. Within one partition the records keep
   * their order.
   */
  send(topic: string, records: OutgoingRecord[]): Promise<SentBatch[]>;
}

export interface ProducerOptions {
  /**
   * Idempotent (default true): the broker drops retried duplicates, so a retry never writes a
   * record twice or out of order within a producer session. Implies acks=all.
   */
  idempotent?: boolean;
  /** Only for a non-idempotent producer: wait for the leader only (benchmarks). Default 'all'. */
  acks?: 'all' | 'leader';
}

/** An idempotent producer. Never creates topics (they come from platform/kafka/topology.ts). */
export interface RecordProducer extends RecordSender {
  disconnect(): Promise<void>;
}

/** A consumer group position to commit: the next offset the group reads in that partition. */
export interface GroupOffset {
  topic: string;
  partition: number;
  /** Next offset to read (last processed offset + 1). */
  offset: Offset;
  /** Free text stored with the offset (the relay keeps its event-store cursor here). */
  metadata?: string;
}

/**
 * An open Kafka transaction: its records and the group offsets sent with sendOffsets become
 * visible to read_committed consumers together on commit, or never (abort, crash, fencing).
 */
export interface Transaction extends RecordSender {
  /** Commits consumer-group offsets atomically with this transaction's records. */
  sendOffsets(groupId: string, offsets: GroupOffset[]): Promise<void>;
  commit(): Promise<void>;
  abort(): Promise<void>;
}

export interface TransactionalProducerOptions {
  /**
   * Stable identity across restarts. Opening a producer with an id fences every older producer
   * with the same id and completes or aborts its open transaction before returning.
   */
  transactionalId: string;
  /** How long the coordinator lets a transaction stay open before aborting it. Default 60 s. */
  transactionTimeoutMs?: number;
}

/** A transactional producer: one transaction at a time. */
export interface TransactionalProducer {
  transaction(): Promise<Transaction>;
  disconnect(): Promise<void>;
}

/** Records of ONE partition, in offset order, as handed to a batch handler. */
export interface PartitionBatch {
  topic: string;
  partition: number;
  /** Never empty: batches without records (e.g. only transaction markers) are not handed over. */
  records: ConsumedRecord[];
  /** The partition's high watermark when the batch was fetched (the offset after the last record). */
  highWatermark: Offset;
  /** Records in the partition after this batch's last record, when it was fetched. */
  lag: number;
}

/** What a batch handler can ask of its consumer while it works. */
export interface BatchContext {
  /** Tells the group this member is alive; call it during long batches (the session times out otherwise). */
  heartbeat(): Promise<void>;
  /** False once the consumer is stopping: stop early, the batch will be re-delivered to someone. */
  isRunning(): boolean;
  /** True once a seek on this partition made the batch obsolete: do not apply it. */
  isStale(): boolean;
}

/**
 * Handles one partition's batch. Returning normally means the whole batch was processed: the
 * consumer reads on after its last record (in memory; nothing is committed: commit() does).
 * Throwing means nothing of it was: the consumer restarts and the batch comes again (from the
 * last committed or seeked offset).
 */
export type BatchHandler = (batch: PartitionBatch, ctx: BatchContext) => Promise<void>;

/** A topic and the partitions of it this member was given. */
export interface TopicPartitions {
  topic: string;
  partitions: number[];
}

export interface BatchConsumerOptions {
  /** The consumer group; its members share the topics' partitions. */
  groupId: string;
  topics: string[];
  /** Where a partition without a committed offset starts: the earliest record (default) or the end. */
  fromBeginning?: boolean;
  /** Read only committed transactional records (default true). */
  readCommitted?: boolean;
  /** Partitions handled at the same time, each batch by its own handler call (default 1). */
  concurrency?: number;
  /** Upper bound on a fetch per partition (default 1 MiB). */
  maxBytesPerPartition?: number;
  /** How long the broker may hold a fetch open waiting for data (default 5000 ms). */
  maxWaitMs?: number;
  /** How long a silent member keeps its partitions (default 30 s). */
  sessionTimeoutMs?: number;
  /** How long the group waits for members to rejoin on a rebalance (default 60 s). */
  rebalanceTimeoutMs?: number;
  /** Heartbeat period (default 3 s); keep it well under the session timeout. */
  heartbeatIntervalMs?: number;
  /**
   * Called after every (re)join with this member's partitions, before their batches are handled
   * (e.g. to seek to offsets stored elsewhere). A partition lost in a rebalance simply stops
   * coming; a handler still working on it finds isStale() or its commit refused.
   */
  onAssigned?: (assignment: TopicPartitions[]) => Promise<void> | void;
  /**
   * Called with the offset after the last entry of each batch of a partition once it is handled,
   * and for batches that hand nothing over (only transaction markers or aborted records): how a
   * reader learns it has passed the high watermark when a partition ends in such entries.
   */
  onPosition?: (topic: string, partition: number, nextOffset: Offset) => void;
}

/**
 * A group member that hands batches, one partition per call, to a handler. It never commits by
 * itself (no autocommit): the owner commits explicit offsets, or keeps them elsewhere and seeks.
 * Delivery is at-least-once per partition, in offset order.
 */
export interface BatchConsumer {
  /** Joins the group and starts handing batches over; resolves once running (not when done). */
  run(handler: BatchHandler): Promise<void>;
  /** Commits the group's next offsets (last processed offset + 1). */
  commit(offsets: GroupOffset[]): Promise<void>;
  /** Moves this member's position in a partition it holds; batches fetched before become stale. */
  seek(topic: string, partition: number, offset: Offset): void;
  /** Stops fetching a partition this member holds, until resume. */
  pause(topic: string, partitions: number[]): void;
  resume(topic: string, partitions: number[]): void;
  /** Leaves the group and closes the connections (after the running handlers return). */
  disconnect(): Promise<void>;
}

/** Low and high offsets of one partition: records [low, high) are readable. */
export interface PartitionOffsets {
  partition: number;
  low: Offset;
  high: Offset;
}

/** A consumer group's committed position in one partition. */
export interface CommittedOffset {
  partition: number;
  /** Next offset to read; null when the group never committed this partition. */
  offset: Offset | null;
  metadata: string | null;
}

/** One allowing ACL: `principal` (`User:<name>`) may do `operation` on matching resources. */
export interface AclGrant {
  principal: string;
  resource: 'topic' | 'group' | 'transactional-id' | 'cluster';
  /** The resource's name, or its prefix with `pattern: 'prefixed'`. */
  name: string;
  pattern: 'literal' | 'prefixed';
  operation: 'all' | 'read' | 'write' | 'describe' | 'describe-configs' | 'create' | 'idempotent-write';
}

export interface ClusterInfo {
  clusterId: string;
  controllerId: number | null;
  brokers: { nodeId: number; host: string; port: number }[];
}

/** Topic and offset administration. */
export interface TopicAdmin {
  listTopics(): Promise<string[]>;
  /**
   * Creates the topics (partitions, replication, config) and waits for their leaders. A topic
   * that already exists is left as it is, not an error (two processes may ensure at once).
   */
  createTopics(specs: TopicSpec[]): Promise<void>;
  /** Deletes the topics; names that do not exist are ignored. */
  deleteTopics(topics: string[]): Promise<void>;
  describeCluster(): Promise<ClusterInfo>;
  /** Low and high offsets of every partition of the topic. */
  fetchTopicOffsets(topic: string): Promise<PartitionOffsets[]>;
  /** A group's committed offsets for every partition of the topic. */
  fetchCommittedOffsets(groupId: string, topic: string): Promise<CommittedOffset[]>;
  /** The topics' configuration (name -> value, defaults included) as the brokers report it. */
  describeTopicConfigs(topics: string[]): Promise<Record<string, Record<string, string>>>;
  /** Sets these configuration entries of existing topics (others are left as they are). */
  alterTopicConfigs(changes: Record<string, Record<string, string>>): Promise<void>;
  /**
   * Sets per-broker dynamic configuration (broker id -> entries). The request is Kafka's
   * AlterConfigs: a broker's dynamic entries not named are reset. Setting an entry to the value it
   * has still makes the broker apply it again, which reloads a keystore file rewritten in place.
   */
  alterBrokerConfigs(changes: Record<string, Record<string, string>>): Promise<void>;
  /** Grants (allows) these ACLs on any host; a grant that exists already is not an error. */
  createAcls(grants: AclGrant[]): Promise<void>;
  disconnect(): Promise<void>;
}

/** Connection settings shared by everything opened from one client. */
export interface KafkaOptions {
  brokers?: string[];
  clientId?: string;
  /** Connection retries; 0 for one-shot probes that must answer quickly. */
  retries?: number;
  /** Silences the client library's own logging (probes expect refusals). */
  quiet?: boolean;
  /** TLS and SASL (default: KAFKA_CLIENT_PROPERTIES, platform/kafka/client-properties.ts). */
  security?: KafkaSecurity;
}

/**
 * A line of the client library's log about an error that passes by itself (a group coordinator
 * loading on a fresh broker, a leader election): the client retries it.
 */
export interface ClientLogNote {
  /** What is passing, in words (`the group coordinator is loading`). */
  what: string;
  /** The library's line. */
  detail: string;
  broker?: string;
}

/** The entry point an adapter provides: opens connected producers, consumers and admins. */
export interface KafkaClient {
  producer(opts?: ProducerOptions): Promise<RecordProducer>;
  transactionalProducer(opts: TransactionalProducerOptions): Promise<TransactionalProducer>;
  /** A consumer; it joins its group on run(). */
  batchConsumer(opts: BatchConsumerOptions): BatchConsumer;
  admin(): Promise<TopicAdmin>;
}
