// The one module that touches kafkajs. kafkajs is no longer maintained; everything else in
// the project goes through these functions so the client can be swapped.
import {
  type Admin,
  type Consumer,
  type ConsumerConfig,
  Kafka,
  logLevel,
  type Producer,
  type ProducerConfig,
} from 'kafkajs';
import { loadEndpoints } from '../config/endpoints.js';
import { type TopicSpec, topology } from './topology.js';

export type {
  Admin,
  Consumer,
  EachBatchPayload,
  EachMessagePayload,
  KafkaMessage,
  Producer,
  RecordMetadata,
} from 'kafkajs';

export interface KafkaOptions {
  brokers?: string[];
  clientId?: string;
  /** Connection retries; 0 for one-shot probes that must answer quickly. */
  retries?: number;
  /** Silences kafkajs' own logging (probes expect refusals). */
  quiet?: boolean;
}

export function kafka(opts: KafkaOptions = {}): Kafka {
  return new Kafka({
    clientId: opts.clientId ?? 'rods',
    brokers: opts.brokers ?? loadEndpoints().kafkaBrokers,
    logLevel: opts.quiet ? logLevel.NOTHING : logLevel.ERROR,
    retry: { retries: opts.retries ?? 8, initialRetryTime: 200 },
    connectionTimeout: opts.retries === 0 ? 1500 : 5000,
  });
}

export function producer(k: Kafka, config: ProducerConfig = {}): Producer {
  return k.producer({ allowAutoTopicCreation: false, ...config });
}

export function consumer(k: Kafka, config: ConsumerConfig): Consumer {
  return k.consumer({ allowAutoTopicCreation: false, ...config });
}

export interface EnsureResult {
  created: string[];
  existing: string[];
}

/** Creates the missing topics with explicit partitions and replication (idempotent). */
export async function ensureTopics(admin: Admin, specs: TopicSpec[] = topology()): Promise<EnsureResult> {
  const existing = new Set(await admin.listTopics());
  const missing = specs.filter((s) => !existing.has(s.name));
  if (missing.length > 0) {
    await admin.createTopics({
      waitForLeaders: true,
      topics: missing.map((s) => ({
        topic: s.name,
        numPartitions: s.partitions,
        replicationFactor: s.replicationFactor,
        configEntries: Object.entries(s.config).map(([name, value]) => ({ name, value })),
      })),
    });
  }
  return {
    created: missing.map((s) => s.name),
    existing: specs.filter((s) => existing.has(s.name)).map((s) => s.name),
  };
}

/** Runs fn with a connected admin client and always disconnects. */
export async function withAdmin<T>(fn: (admin: Admin) => Promise<T>, opts: KafkaOptions = {}): Promise<T> {
  const admin = kafka(opts).admin();
  await admin.connect();
  try {
    return await fn(admin);
  } finally {
    await admin.disconnect();
  }
}
