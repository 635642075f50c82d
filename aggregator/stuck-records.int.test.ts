// No record stalls a partition (issue 11, path 4): ids PostgreSQL cannot store, a record whose
// transaction keeps failing, and a record too large to dead-letter whole. Each case is followed
// by a good record that must be counted; before the fix each one stopped its partition for good.
import { randomUUID } from 'node:crypto';
import { afterAll, describe, expect, inject, it } from 'vitest';
import { decode, encode } from '../codec/registry.js';
import { readUntil } from '../kafka/client.js';
import { DLQ_KEPT_BYTES, DLQ_TOPIC } from '../kafka/dlq.js';
import { kafkaStatsCheck } from '../replay/kafka-source.js';
import type { DeadLettered } from '../schemas/types.generated.js';
import { registerCampaign } from '../store/campaigns.js';
import { createPool } from '../store/db.js';
import { waitUntil } from '../test/support/wait.js';
import { AggregatorService } from './service.js';
import { queryStats } from './stats-query.js';
import { watermark } from './steps.js';
import { freshRewardTopic, produceTrace } from './trace.js';

const pool = createPool({ application: 'rods-aggregator-stuck-test', max: 6 });
// The injected trigger is the tables' owner's to create and drop (the application's role may not).
const endpoints = inject('endpoints');
const owner = createPool({ connectionString: endpoints.ownerDatabaseUrl ?? endpoints.databaseUrl, max: 1 });
afterAll(async () => {
  await pool.end();
  await owner.end();
});

function group(campaignId: string, taskId: string, over: Record<string, unknown> = {}) {
  return {
    key: taskId,
    value: encode('RolloutGroupScored', {
      eventId: randomUUID(),
      campaignId,
      taskId,
      step: 1,
      policyVersion: 'p1',
      rewards: [0.25, 0.5, 0.75, 1],
      producedAt: 1,
      ...over,
    } as never),
  };
}

function stepClosed(campaignId: string, groupCount: number) {
  return {
    key: `${campaignId}/step-close`,
    value: encode('StepClosed', { eventId: randomUUID(), campaignId, step: 1, groupCount, producedAt: 1 }),
  };
}

/** The dead letters of `topic`, by source offset, once `count` are there. */
async function deadLetters(topic: string, count: number): Promise<Map<number, DeadLettered>> {
  const letters = new Map<number, DeadLettered>();
  await readUntil(
    DLQ_TOPIC,
    (record) => {
      const d = decode(record.value!);
      if (d.name === 'DeadLettered' && d.payload.sourceTopic === topic)
        letters.set(d.payload.offset, d.payload);
      return letters.size >= count;
    },
    { timeoutMs: 60_000 },
  ).catch((e: Error) => {
    throw new Error(`${letters.size} of ${count} dead letters of ${topic} found (${e.message})`);
  });
  return letters;
}

/** Runs an aggregator on the topic until the task has a group counted (and step 1 closed). */
async function countedUntil(
  campaignId: string,
  topic: string,
  taskId: string,
  stepClosed = false,
): Promise<void> {
  const svc = new AggregatorService(pool, { groupId: `g-${campaignId}`, topic, logLevel: 'silent' });
  await svc.start();
  try {
    await waitUntil(
      async () =>
        (await queryStats(pool, { campaignId, taskId }))[0]?.groups === 1 &&
        (!stepClosed || (await watermark(pool, campaignId, 1)).reached),
      {
        what: `the group of ${taskId} after the bad record to be counted${stepClosed ? ' and step 1 closed' : ''}`,
        timeoutMs: 90_000,
        intervalMs: 200,
      },
    );
  } finally {
    await svc.stop();
  }
}

describe('a partition that never moves', () => {
  it('dead-letters ids PostgreSQL cannot store (U+0000) with the reason, and counts the records after them', async () => {
    const campaignId = `stuck-nul-${randomUUID().slice(0, 8)}`;
    await registerCampaign(pool, { campaignId });
    const topic = await freshRewardTopic('agg.nul', 1);
    // Written straight to the topic (the gateway refuses them). A lone surrogate cannot reach the
    // topic as such: UTF-8 encoding turns it into U+FFFD, which PostgreSQL stores.
    const bad = [
      group(campaignId, 'task-\u0000-nul'),
      group(campaignId, 'task-a', { policyVersion: 'p\u0000' }),
      group(`camp\u0000${campaignId}`, 'task-a'),
      stepClosed(`camp\u0000${campaignId}`, 1),
    ];
    await produceTrace(topic, [group(campaignId, 'task-a'), ...bad, group(campaignId, 'task-b')]);

    await countedUntil(campaignId, topic, 'task-b');
    expect((await queryStats(pool, { campaignId })).map((r) => [r.taskId, r.groups])).toEqual([
      ['task-a', 1],
      ['task-b', 1],
    ]);
    const letters = await deadLetters(topic, bad.length);
    expect([...letters.keys()].sort()).toEqual([1, 2, 3, 4]);
    for (const [offset, l] of letters) {
      expect(l.reasonCode).toBe('unstorable-text');
      expect(l.reason).toMatch(/(taskId|policyVersion|campaignId) .* contains the control character U\+0000/);
      expect(Buffer.compare(l.value!, bad[offset - 1]!.value)).toBe(0);
    }
  }, 150_000);

  it.each([
    ['fails 3 times at the same offset', 0, 3],
    // A count left by an earlier process (a restart, a moved partition) is carried on, not restarted.
    ['failed 5 times before a restart and fails once more', 5, 6],
  ])(
    'dead-letters a record whose transaction %s, with the error, and the partition moves on',
    async (_, earlier, total) => {
      const campaignId = `stuck-fail-${randomUUID().slice(0, 8)}`;
      await registerCampaign(pool, { campaignId });
      const topic = await freshRewardTopic('agg.fail', 1);
      // A record that makes the store throw: a trigger refuses this one task's statistics.
      const poisonTask = `task-fail-${randomUUID().slice(0, 8)}`;
      const fn = `rods_test_fail_${poisonTask.slice(-8)}`;
      await owner.query(
        `create function ${fn}() returns trigger language plpgsql as $$
       begin raise exception 'injected failure for %', new.task_id; end $$`,
      );
      await owner.query(
        `create trigger ${fn} before insert or update on task_stats for each row
       when (new.task_id = '${poisonTask}') execute function ${fn}()`,
      );
      if (earlier > 0)
        await pool.query(
          `insert into aggregator_record_failures (group_id, topic, partition, "offset", attempts, last_error)
         values ($1, $2, 0, 1, $3, 'earlier')`,
          [`g-${campaignId}`, topic, earlier],
        );
      try {
        await produceTrace(topic, [
          group(campaignId, 'task-a'),
          group(campaignId, poisonTask),
          group(campaignId, 'task-b'),
          stepClosed(campaignId, 3),
        ]);
        // The refused group counts as rejected: its step closes with the two others.
        await countedUntil(campaignId, topic, 'task-b', true);
      } finally {
        await owner.query(`drop trigger if exists ${fn} on task_stats`);
        await owner.query(`drop function if exists ${fn}()`);
      }
      expect((await queryStats(pool, { campaignId })).map((r) => r.taskId)).toEqual(['task-a', 'task-b']);
      const letter = (await deadLetters(topic, 1)).get(1)!;
      expect(letter.reasonCode).toBe('processing-failed');
      expect(letter.reason).toContain(`failed ${total} times at offset 1`);
      expect(letter.reason).toContain(`injected failure for ${poisonTask}`);
      const failures = await pool.query('select 1 from aggregator_record_failures where topic = $1', [topic]);
      expect(failures.rowCount).toBe(0);
      // Replay from the topic skips what the aggregator gave up on, and equals live.
      expect(await kafkaStatsCheck(pool, campaignId, topic)).toMatchObject({
        equal: true,
        tasks: 2,
        groups: 2,
      });
    },
    150_000,
  );

  it('dead-letters a ~10 MB undecodable record in a form that fits under the broker limit, and counts what follows', async () => {
    const campaignId = `stuck-big-${randomUUID().slice(0, 8)}`;
    await registerCampaign(pool, { campaignId });
    const topic = await freshRewardTopic('agg.big', 1);
    // Not Avro; just under the local broker's message.max.bytes (10 MiB), so the record is taken
    // but a dead letter carrying all of it (plus reason and source fields) would not be.
    const size = 10 * 1024 * 1024 - 100;
    const big = Buffer.alloc(size, 0x78);
    // Sent alone: in one batch with the next record it would be over the limit itself.
    await produceTrace(topic, [{ key: 'task-a', value: big }]);
    await produceTrace(topic, [group(campaignId, 'task-b')]);

    await countedUntil(campaignId, topic, 'task-b');
    const letter = (await deadLetters(topic, 1)).get(0)!;
    expect(letter.reasonCode).toBe('bad-magic');
    expect(letter.value!.length).toBe(DLQ_KEPT_BYTES);
    expect(Buffer.compare(letter.value!, big.subarray(0, DLQ_KEPT_BYTES))).toBe(0);
    expect(letter.reason).toMatch(
      new RegExp(`value: first 65536 of ${size} bytes kept, sha256 [0-9a-f]{64}`),
    );
  }, 150_000);
});
