// The project's Kafka topics in one place: names, keys, partition counts and retention.
// Rewards and decisions are kept forever by default so that a campaign can be replayed.
import { loadKafkaSecurity } from './client-properties.js';

export interface TopicSpec {
  name: string;
  /** What the record key is; documents the partitioning contract. */
  key: string;
  partitions: number;
  replicationFactor: number;
  config: Record<string, string>;
  doc: string;
}

export interface TopologyOptions {
  /** Partitions for the high-volume, task-keyed topics. */
  partitions?: number;
  replicationFactor?: number;
}

const FOREVER = '-1';

export const REWARDS_TOPIC = 'rods.rewards.v1';
export const TASK_STATS_TOPIC = 'rods.task-stats.v1';
export const DECISIONS_TOPIC = 'rods.decisions.v1';
export const RELAY_CHECKPOINT_TOPIC = 'rods.relay-checkpoints.v1';
export const AUDIT_ANCHORS_TOPIC = 'rods.audit-anchors.v1';

/**
 * The largest record (key, value and headers) the project writes, from RODS_KAFKA_MAX_RECORD_BYTES
 * (default 1,000,000: under Kafka's default message.max.bytes of 1,048,588, so records fit a broker
 * left at its defaults). Bigger payloads are cut (dead letters) or referenced (the relay).
 */
export function maxRecordBytes(env: NodeJS.ProcessEnv = process.env): number {
  const v = Number(env.RODS_KAFKA_MAX_RECORD_BYTES);
  return Number.isSafeInteger(v) && v >= MIN_RECORD_BYTES ? v : 1_000_000;
}

/** Below this a dead letter could not keep a useful prefix of the original bytes. */
export const MIN_RECORD_BYTES = 64 * 1024;

/**
 * The settings a topic's records need to stay replayable: what `ensureTopics` checks on topics
 * that exist already (created elsewhere, or by an older version). Rewards, decisions, anchors and
 * dead letters must be kept for ever and never compacted (a compacted rewards topic keeps one
 * group per task); the compacted task-stats topic must be compacted.
 */
export function replayRequirements(spec: TopicSpec): Record<string, (value: string | undefined) => boolean> {
  const policy = spec.config['cleanup.policy'];
  if (policy === 'compact') return { 'cleanup.policy': (v) => (v ?? '').split(',').includes('compact') };
  if (spec.config['retention.ms'] !== FOREVER) return {};
  return {
    'retention.ms': (v) => v === FOREVER,
    'retention.bytes': (v) => v === undefined || v === FOREVER,
    'cleanup.policy': (v) => v === 'delete',
  };
}

/**
 * RODS_KAFKA_REPLICATION, or 3 when KAFKA_BROKERS (else bootstrap.servers) lists three or more (a replicated
 * cluster, such as the local stack's three-node one), else 1.
 */
export function defaultReplication(env: NodeJS.ProcessEnv = process.env): number {
  if (env.RODS_KAFKA_REPLICATION) return Number(env.RODS_KAFKA_REPLICATION);
  return bootstrapCount(env) >= 3 ? 3 : 1;
}

/** Brokers in KAFKA_BROKERS, else in KAFKA_CLIENT_PROPERTIES' bootstrap.servers. */
function bootstrapCount(env: NodeJS.ProcessEnv): number {
  const brokers = (env.KAFKA_BROKERS ?? '').split(',').filter((b) => b.trim() !== '');
  if (brokers.length > 0 || !env.KAFKA_CLIENT_PROPERTIES) return brokers.length;
  try {
    return loadKafkaSecurity(env).bootstrapServers?.length ?? 0;
  } catch {
    return 0; // an unusable file is refused by name where a client opens
  }
}

export function topology(opts: TopologyOptions = {}): TopicSpec[] {
  const partitions = opts.partitions ?? Number(process.env.RODS_KAFKA_PARTITIONS ?? 6);
  const replicationFactor = opts.replicationFactor ?? defaultReplication();
  return [
    {
      name: REWARDS_TOPIC,
      key: 'task id',
      partitions,
      replicationFactor,
      config: { 'retention.ms': FOREVER, 'cleanup.policy': 'delete' },
      doc: 'RolloutGroupScored and StepClosed observations from the trainer',
    },
    {
      name: TASK_STATS_TOPIC,
      key: 'task id',
      partitions,
      replicationFactor,
      config: { 'cleanup.policy': 'compact', 'min.compaction.lag.ms': '60000' },
      doc: 'latest TaskStatsUpdated per task (compacted); campaigns recorded before StepStatsRecorded, which goes to the decisions topic',
    },
    {
      name: DECISIONS_TOPIC,
      key: 'campaign id',
      partitions: Math.max(1, Math.min(partitions, 3)),
      replicationFactor,
      config: { 'retention.ms': FOREVER, 'cleanup.policy': 'delete' },
      doc: 'campaign and curriculum decision events relayed from the event store',
    },
    {
      name: RELAY_CHECKPOINT_TOPIC,
      key: 'none',
      partitions: 1,
      replicationFactor,
      config: { 'cleanup.policy': 'compact' },
      doc: "never written: the outbox relay commits its event-store cursor as this topic's group offset, inside its Kafka transactions",
    },
    {
      name: AUDIT_ANCHORS_TOPIC,
      key: 'stream prefix ("*" for every stream)',
      partitions: 1,
      replicationFactor,
      config: { 'retention.ms': FOREVER, 'cleanup.policy': 'delete' },
      doc: "AuditAnchored: digests over the event store's stream heads, the copy `rods audit verify --kafka` checks",
    },
    {
      name: 'rods.dlq.v1',
      key: 'source topic',
      partitions: 1,
      replicationFactor,
      // Kept forever: replay from Kafka skips the records the aggregator dead-lettered as
      // processing-failed by reading them here, for the whole campaign.
      config: { 'retention.ms': FOREVER, 'cleanup.policy': 'delete' },
      doc: 'records that could not be decoded or validated, with the reason and original bytes',
    },
  ];
}
