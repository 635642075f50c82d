// The project's entry to Kafka: opens the port (platform/kafka/port.ts) with the one adapter in use.
// Nothing outside platform/kafka/adapters/ sees a client library's types; swapping kafkajs for another
// client changes openKafka and adds an adapter folder (platform/kafka/README.md).
import { randomUUID } from 'node:crypto';
import { kafkajsClient } from './adapters/kafkajs/index.js';
import { setTransientLog } from './adapters/kafkajs/log.js';
import {
  type BatchConsumer,
  type BatchConsumerOptions,
  type ClientLogNote,
  type ConsumedRecord,
  KafkaAuthorizationError,
  type KafkaClient,
  type KafkaOptions,
  type TopicAdmin,
  type TopicPartitions,
} from './port.js';
import { replayRequirements, type TopicSpec, topology } from './topology.js';

export type * from './port.js';
export { KafkaAuthorizationError, RecordTooLargeError } from './port.js';

/**
 * Where the client library's transient errors go (a coordinator loading, a leader election: they
 * pass by themselves) instead of its error log; undefined puts them back as warnings. Real
 * failures are logged as errors either way.
 */
export function onTransientKafkaErrors(handler: ((note: ClientLogNote) => void) | undefined): void {
  setTransientLog(handler);
}

/** A client for the configured brokers (KAFKA_BROKERS unless opts.brokers). */
export function openKafka(opts: KafkaOptions = {}): KafkaClient {
  return kafkajsClient(opts);
}

export interface EnsureResult {
  created: string[];
  existing: string[];
  /** Settings of existing topics set right (`fix`). */
  fixed: TopicSettingProblem[];
}

/** A topic whose settings lose what replay needs. */
export class TopicSettingsError extends Error {
  override name = 'TopicSettingsError';
  constructor(readonly problems: TopicSettingProblem[]) {
    super(
      `Kafka topics cannot serve replay: ${problems
        .map((p) => `${p.topic} has ${p.setting}=${p.actual ?? '(unset)'}, needs ${p.expected}`)
        .join(
          '; ',
        )}. Fix: \`rods topics ensure --fix\` (or kafka-configs --alter --entity-type topics --entity-name <topic> --add-config <setting>=<value>)`,
    );
  }
}

/** Topics rods needs that do not exist, and the principal may not create them. */
export class TopicsMissingError extends Error {
  override name = 'TopicsMissingError';
  constructor(
    readonly missing: TopicSpec[],
    cause: KafkaAuthorizationError,
  ) {
    super(
      `Kafka topics missing and this principal may not create them (${cause.code}): ${missing
        .map((s) => `${s.name} (${describeSpec(s)})`)
        .join('; ')}. Create them as an administrator, e.g. ${missing
        .map(
          (s) =>
            `kafka-topics.sh --bootstrap-server <brokers> --command-config <admin.properties> --create --topic ${s.name} --partitions ${s.partitions} --replication-factor ${s.replicationFactor}${Object.entries(
              s.config,
            )
              .map(([k, v]) => ` --config ${k}=${v}`)
              .join('')}`,
        )
        .join(' ; ')}`,
      { cause },
    );
  }
}

function describeSpec(s: TopicSpec): string {
  return [
    `${s.partitions} partitions`,
    `replication ${s.replicationFactor}`,
    ...Object.entries(s.config).map(([k, v]) => `${k}=${v}`),
  ].join(', ');
}

export interface TopicSettingProblem {
  topic: string;
  setting: string;
  actual: string | undefined;
  expected: string;
}

/**
 * Creates the missing topics and checks the settings of existing ones against what replay needs
 * (platform/kafka/topology.ts replayRequirements): with `fix`, a wrong setting is set right (the local
 * stack, `rods topics ensure --fix`); without, it is a TopicSettingsError naming each.
 */
export async function ensureTopics(
  admin: TopicAdmin,
  specs: TopicSpec[] = topology(),
  opts: { fix?: boolean } = {},
): Promise<EnsureResult> {
  const existing = new Set(await admin.listTopics());
  const missing = specs.filter((s) => !existing.has(s.name));
  try {
    await admin.createTopics(missing);
  } catch (e) {
    // A principal that may not create topics (a managed cluster): name what an operator must create.
    if (e instanceof KafkaAuthorizationError) throw new TopicsMissingError(missing, e);
    throw e;
  }
  const present = specs.filter((s) => existing.has(s.name));
  const problems = await topicSettingProblems(admin, present);
  const fixed: TopicSettingProblem[] = [];
  if (problems.length > 0) {
    if (!opts.fix) throw new TopicSettingsError(problems);
    const changes: Record<string, Record<string, string>> = {};
    for (const p of problems) changes[p.topic] = { ...changes[p.topic], [p.setting]: p.expected };
    await admin.alterTopicConfigs(changes);
    const left = await topicSettingProblems(admin, present);
    if (left.length > 0) throw new TopicSettingsError(left);
    fixed.push(...problems);
  }
  return {
    created: missing.map((s) => s.name),
    existing: present.map((s) => s.name),
    fixed,
  };
}

/** The settings of existing topics that do not serve replay. */
export async function topicSettingProblems(
  admin: TopicAdmin,
  specs: TopicSpec[],
): Promise<TopicSettingProblem[]> {
  const checks = specs
    .map((s) => [s, replayRequirements(s)] as const)
    .filter(([, r]) => Object.keys(r).length > 0);
  if (checks.length === 0) return [];
  const configs = await admin.describeTopicConfigs(checks.map(([s]) => s.name));
  const problems: TopicSettingProblem[] = [];
  for (const [spec, required] of checks)
    for (const [setting, ok] of Object.entries(required)) {
      const actual = configs[spec.name]?.[setting];
      if (!ok(actual))
        problems.push({ topic: spec.name, setting, actual, expected: spec.config[setting] ?? '-1' });
    }
  return problems;
}

/** Runs fn with a connected admin client and always disconnects. */
export async function withAdmin<T>(
  fn: (admin: TopicAdmin) => Promise<T>,
  opts: KafkaOptions = {},
): Promise<T> {
  const admin = await openKafka(opts).admin();
  try {
    return await fn(admin);
  } finally {
    await admin.disconnect();
  }
}

export interface ReadOptions extends Partial<Omit<BatchConsumerOptions, 'topics'>> {
  /** Gives up (rejects) after this long; default 60 s. */
  timeoutMs?: number;
  client?: KafkaClient;
  /** Where each assigned partition starts reading (undefined: its beginning). */
  seekTo?: (partition: number) => string | undefined;
}

/** The record at one offset of one partition (null when the partition has no record there). */
export async function readRecordAt(
  topic: string,
  partition: number,
  offset: string,
  opts: { timeoutMs?: number; client?: KafkaClient } = {},
): Promise<ConsumedRecord | null> {
  const ends = await withAdmin((a) => a.fetchTopicOffsets(topic));
  const p = ends.find((x) => x.partition === partition);
  if (!p || BigInt(offset) < BigInt(p.low) || BigInt(offset) >= BigInt(p.high)) return null;
  let found: ConsumedRecord | null = null;
  await readBatches(
    topic,
    async (records, part) => {
      if (part !== partition) return false;
      for (const r of records)
        if (BigInt(r.offset) >= BigInt(offset)) {
          if (r.offset === offset) found = r;
          return true;
        }
      return false;
    },
    { ...opts, seekTo: (part) => (part === partition ? offset : p.high) },
    opts.timeoutMs ?? 60_000,
  );
  return found;
}

/**
 * Reads `topic` from the beginning with a fresh consumer group, a fetched batch at a time in
 * partition order, until `onBatch` says it is done; then leaves the group.
 */
async function readBatches(
  topic: string,
  onBatch: (records: readonly ConsumedRecord[], partition: number) => Promise<boolean>,
  opts: ReadOptions,
  defaultTimeoutMs: number | undefined,
  /** The consumer's position in a partition moved (also past entries no batch hands over); true: done. */
  onPosition?: (partition: number, nextOffset: number) => boolean,
): Promise<void> {
  const { timeoutMs = defaultTimeoutMs, client, ...consumerOpts } = opts;
  let finish: (() => void) | undefined;
  const c: BatchConsumer = (client ?? openKafka({ clientId: 'rods-reader' })).batchConsumer({
    groupId: `rods-reader-${randomUUID()}`,
    ...consumerOpts,
    ...(opts.seekTo
      ? {
          onAssigned: (assignment: TopicPartitions[]) => {
            for (const a of assignment)
              for (const p of a.partitions) {
                const at = opts.seekTo!(p);
                if (at !== undefined) c.seek(a.topic, p, at);
              }
          },
        }
      : {}),
    topics: [topic],
    ...(onPosition
      ? { onPosition: (_t, partition, next) => onPosition(partition, Number(next)) && finish?.() }
      : {}),
  });
  try {
    await new Promise<void>((resolve, reject) => {
      let done = false;
      const timer =
        timeoutMs === undefined
          ? undefined
          : setTimeout(() => reject(new Error(`reading ${topic}: gave up after ${timeoutMs} ms`)), timeoutMs);
      finish = () => {
        done = true;
        clearTimeout(timer);
        resolve();
      };
      c.run(async (batch, ctx) => {
        if (done) return;
        if (await onBatch(batch.records, batch.partition)) {
          finish!();
          return;
        }
        await ctx.heartbeat();
      }).catch((e) => {
        clearTimeout(timer);
        reject(e);
      });
    });
  } finally {
    await c.disconnect();
  }
}

/**
 * Reads `topic` from the beginning with a fresh consumer group, handing every record to
 * `onRecord` in partition order, until it returns true; then leaves the group.
 */
export async function readUntil(
  topic: string,
  onRecord: (record: ConsumedRecord, partition: number) => boolean | Promise<boolean>,
  opts: ReadOptions = {},
): Promise<void> {
  await readBatches(
    topic,
    async (records, partition) => {
      for (const r of records) if (await onRecord(r, partition)) return true;
      return false;
    },
    opts,
    60_000,
  );
}

/**
 * Reads `topic` from the beginning with a fresh consumer group up to its end when called (each
 * partition's high watermark then), handing each fetched batch of those records to `onBatch` in
 * partition order; then leaves the group. A topic that does not exist or is empty reads as
 * nothing. No timeout unless `timeoutMs` is given (a replay of a long campaign reads for minutes).
 */
export async function readToEnd(
  topic: string,
  onBatch: (records: readonly ConsumedRecord[], partition: number) => void | Promise<void>,
  opts: ReadOptions = {},
): Promise<void> {
  const offsets = await withAdmin(async (a) =>
    (await a.listTopics()).includes(topic) ? a.fetchTopicOffsets(topic) : [],
  );
  const ends = new Map(
    offsets.filter((p) => Number(p.high) > Number(p.low)).map((p) => [p.partition, Number(p.high)]),
  );
  if (ends.size === 0) return;
  const left = new Set(ends.keys());
  await readBatches(
    topic,
    async (records, partition) => {
      if (!left.has(partition)) return false;
      const end = ends.get(partition)!;
      const n = records.length;
      // Records sent after the read began are not part of it.
      await onBatch(
        n > 0 && Number(records[n - 1]!.offset) >= end
          ? records.filter((r) => Number(r.offset) < end)
          : records,
        partition,
      );
      return false;
    },
    opts,
    undefined,
    // The consumer's position, reported after each batch is handed over and past entries no batch
    // hands over (a transaction's commit marker, an aborted transaction's records), says when a
    // partition has reached its end.
    (partition, next) => {
      if (left.has(partition) && next >= ends.get(partition)!) left.delete(partition);
      return left.size === 0;
    },
  );
}
