// A send resolves only once every record is written, against kafkajs' own send loop: the installed
// kafkajs sendMessages (node_modules/kafkajs/src/producer/sendMessages.js) runs over a cluster of
// two fake brokers where a partition's leadership moves from B to A during the send, the case in
// which kafkajs resolves with B's records never written (send.ts says why).
import { createRequire } from 'node:module';
import { describe, expect, it } from 'vitest';
import type { OutgoingRecord } from '../../port.js';
import { MAX_RESENDS, PartialSendError, partitionerFor, sendAll } from './send.js';

const require = createRequire(import.meta.url);
const sendMessages = require('kafkajs/src/producer/sendMessages');
const createRetry = require('kafkajs/src/retry');
const { createErrorFromCode } = require('kafkajs/src/protocol/error');
const NOT_LEADER_FOR_PARTITION = 6;

type Produced = { partition: number; messages: { key: Buffer | null }[] };

/**
 * Two brokers (1 = A, 2 = B) over 3 partitions. Partition 2 has just moved from B to A: the
 * client's metadata still names B until it refreshes, and B answers NOT_LEADER.
 */
function movingLeaderCluster() {
  const actual: Record<number, number> = { 0: 1, 1: 1, 2: 1 };
  let leaders: Record<number, number> = { 0: 1, 1: 1, 2: 2 };
  const written: Produced[] = [];
  let offset = 0;
  const broker = (nodeId: number) => ({
    nodeId,
    async produce({ topicData }: { topicData: { topic: string; partitions: Produced[] }[] }) {
      const parts = topicData.flatMap((t) => t.partitions);
      if (parts.some((p) => actual[p.partition] !== nodeId)) {
        // B answers after A did (the case that loses records; with A still in flight, the retry
        // sends A everything again).
        await new Promise((r) => setTimeout(r, 20));
        throw createErrorFromCode(NOT_LEADER_FOR_PARTITION);
      }
      written.push(...parts);
      return {
        topics: topicData.map((t) => ({
          topicName: t.topic,
          partitions: t.partitions.map((p) => {
            const at = offset;
            offset += p.messages.length;
            return { partition: p.partition, errorCode: 0, baseOffset: String(at) };
          }),
        })),
      };
    },
  });
  const brokers = { 1: broker(1), 2: broker(2) } as Record<number, ReturnType<typeof broker>>;
  const cluster = {
    refreshMetadataIfNecessary: async () => {},
    refreshMetadata: async () => {
      leaders = { ...actual };
    },
    addMultipleTargetTopics: async () => {},
    isConnected: () => true,
    removeBroker: () => {},
    findTopicPartitionMetadata: () =>
      [0, 1, 2].map((partitionId) => ({ partitionId, leader: leaders[partitionId] })),
    findLeaderForPartitions: (_topic: string, partitions: string[]) => {
      const out: Record<number, number[]> = {};
      for (const p of partitions.map(Number)) out[leaders[p]!] = [...(out[leaders[p]!] ?? []), p];
      return out;
    },
    findBroker: async ({ nodeId }: { nodeId: number }) => brokers[nodeId],
  };
  const eosManager = {
    isTransactional: () => false,
    acquireBrokerLock: async () => {},
    releaseBrokerLock: async () => {},
    getSequence: () => 0,
    updateSequence: () => {},
    getProducerId: () => -1,
    getProducerEpoch: () => 0,
    getTransactionalId: () => undefined,
  };
  const logger = { debug() {}, info() {}, warn() {}, error() {} };
  const run = sendMessages({
    logger,
    cluster,
    partitioner: ({ message }: { message: { partition: number } }) => message.partition,
    eosManager,
    retrier: createRetry({ retries: 3, initialRetryTime: 1, maxRetryTime: 5 }),
  });
  // kafkajs' Producer.send for one topic, over this cluster.
  const sender = {
    send: ({ topic, acks, messages }: { topic: string; acks: number; messages: unknown[] }) =>
      run({ acks, timeout: 1000, topicMessages: [{ topic, messages }] }),
  };
  return { sender, written };
}

const records = (n: number): OutgoingRecord[] =>
  Array.from({ length: n }, (_, i) => ({ key: Buffer.from(`task-${i}`), value: Buffer.from(`v${i}`) }));
const three = { count: async () => 3, choose: partitionerFor() };

describe('kafkajs send', () => {
  it("kafkajs' own send loop resolves without the partition whose leader moved (the upstream behaviour)", async () => {
    const { sender, written } = movingLeaderCluster();
    const choose = partitionerFor();
    const messages = records(30).map((r) => ({
      key: r.key,
      value: r.value,
      partition: choose('t', 3, r as never),
    }));
    const meta = await sender.send({ topic: 't', acks: -1, messages });
    expect(new Set(meta.map((m: { partition: number }) => m.partition))).toEqual(new Set([0, 1]));
    expect(written.some((p) => p.partition === 2)).toBe(false);
  });

  it('sendAll sends the left-out partition again, so every record is written once', async () => {
    const { sender, written } = movingLeaderCluster();
    const resends: number[][] = [];
    const meta = await sendAll(sender as never, 't', records(30), -1, three, (m) => resends.push(m));
    expect(resends).toEqual([[2]]);
    expect(new Set(meta.map((m) => m.partition))).toEqual(new Set([0, 1, 2]));
    const count = written.reduce((n, p) => n + p.messages.length, 0);
    expect(count).toBe(30);
    const keys = written.flatMap((p) => p.messages.map((m) => String(m.key)));
    expect(new Set(keys).size).toBe(30);
  });

  it('gives a key the same partition in every process (murmur2 of the key), an explicit one kept', () => {
    const [one, two] = [partitionerFor(), partitionerFor()];
    const keys = Array.from({ length: 50 }, (_, i) => Buffer.from(`task-${i}`));
    const first = keys.map((key) => one('t', 6, { key, value: null }));
    expect(keys.map((key) => two('t', 6, { key, value: null }))).toEqual(first);
    expect(new Set(first).size).toBe(6);
    expect(one('t', 6, { key: keys[0]!, value: null, partition: 4 })).toBe(4);
  });

  it('fails, naming the partitions, when a partition is never acknowledged', async () => {
    let calls = 0;
    const sender = {
      send: async ({ messages }: { messages: { partition: number }[] }) => {
        calls++;
        return [...new Set(messages.map((m) => m.partition))]
          .filter((p) => p !== 1)
          .map((partition) => ({ topicName: 't', partition, errorCode: 0, baseOffset: '0' }));
      },
    };
    await expect(sendAll(sender as never, 't', records(20), -1, three)).rejects.toThrow(PartialSendError);
    expect(calls).toBe(MAX_RESENDS + 1);
  });

  it('refuses to send to a partition the topic does not have (no partition count read yet: 0)', async () => {
    const sender = { send: async () => [] };
    const none = { count: async () => 0, choose: partitionerFor() };
    await expect(sendAll(sender as never, 't', records(3), -1, none)).rejects.toThrow(
      /is not one of its 0 partitions/,
    );
  });
});
