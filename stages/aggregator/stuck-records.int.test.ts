// No record stalls a partition (issue 11, path 4): ids PostgreSQL cannot store, a record whose
// transaction keeps failing, and a record too large to dead-letter whole. Each case is followed
// by a good record that must be counted; before the fix each one stopped its partition for good.
import { execFile } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import path from 'node:path';
import { promisify } from 'node:util';
import { afterAll, describe, expect, inject, it } from 'vitest';
import { kafkaStatsCheck } from '../../analysis/replay/kafka-source.js';
import { decode, encode } from '../../platform/codec/registry.js';
import { readUntil } from '../../platform/kafka/client.js';
import { DLQ_KEPT_BYTES, DLQ_TOPIC } from '../../platform/kafka/dlq.js';
import { stuckHeads } from '../../platform/store/aggregator/suspects.js';
import { registerCampaign } from '../../platform/store/campaigns.js';
import { createPool } from '../../platform/store/db.js';
import { watermark } from '../../platform/store/steps/watermark.js';
import { queryStats } from '../../platform/store/task-stats/view.js';
import type { DeadLettered } from '../../schemas/types.generated.js';
import { refuseTaskStats } from '../../test/support/aggregator/failing-burst.js';
import { rewardsArrayBomb } from '../../test/support/codec/bombs.js';
import { ROOT } from '../../test/support/sources.js';
import { waitUntil } from '../../test/support/wait.js';
import { AggregatorService } from './service.js';
import { freshRewardTopic, produceTrace, rewardGroupRecord } from './trace.js';

const execFileP = promisify(execFile);
const pool = createPool({ application: 'rods-aggregator-stuck-test', max: 6 });
// The injected trigger is the tables' owner's to create and drop (the application's role may not).
const endpoints = inject('endpoints');
const owner = createPool({ connectionString: endpoints.ownerDatabaseUrl ?? endpoints.databaseUrl, max: 1 });
afterAll(async () => {
  await pool.end();
  await owner.end();
});

const group = rewardGroupRecord;

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
  const svc = new AggregatorService(pool, {
    groupId: `g-${campaignId}`,
    topic,
    logLevel: (process.env.RODS_TEST_LOG_LEVEL as 'silent') ?? 'silent',
  });
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
    ['fails 3 times at the same offset', 0],
    // A count left by an earlier process (a restart, a moved partition) is carried on, not restarted.
    ['failed 5 times before a restart and fails again', 5],
  ])(
    'dead-letters a record whose transaction %s, with the error, and the partition moves on',
    async (_, earlier) => {
      const campaignId = `stuck-fail-${randomUUID().slice(0, 8)}`;
      await registerCampaign(pool, { campaignId });
      const topic = await freshRewardTopic('agg.fail', 1);
      // A record that makes the store throw: a trigger refuses this one task's statistics.
      const poisonTask = `task-fail-${randomUUID().slice(0, 8)}`;
      const allowAgain = await refuseTaskStats(owner, poisonTask.slice(-8), `new.task_id = '${poisonTask}'`);
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
        await allowAgain();
      }
      expect((await queryStats(pool, { campaignId })).map((r) => r.taskId)).toEqual(['task-a', 'task-b']);
      const letter = (await deadLetters(topic, 1)).get(1)!;
      expect(letter.reasonCode).toBe('processing-failed');
      // Its failures: every failing part of the batch it was in, and alone, at least 3 in all.
      const failed = Number(/failed (\d+) times at offset 1 /.exec(letter.reason)?.[1]);
      expect(failed).toBeGreaterThanOrEqual(earlier + 3);
      expect(failed).toBeLessThanOrEqual(earlier + 6);
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

  it('dead-letters a 92-byte record declaring 2^31 - 1 rewards (declared-length) and stays alive; replay reads past it', async () => {
    const campaignId = `stuck-bomb-${randomUUID().slice(0, 8)}`;
    await registerCampaign(pool, { campaignId });
    const topic = await freshRewardTopic('agg.bomb', 1);
    const bomb = {
      key: 'task-a',
      value: rewardsArrayBomb({ campaignId, taskId: 'task-a', eventId: randomUUID() }),
    };
    expect(bomb.value.length).toBeLessThan(200);
    // The trainer declares the groups it sent; a rogue producer's bomb is not one of them.
    await produceTrace(topic, [bomb, group(campaignId, 'task-b'), stepClosed(campaignId, 1)]);
    // Before, avsc allocated 2^31 - 1 items: this process (the aggregator runs in it) died.
    await countedUntil(campaignId, topic, 'task-b', true);
    const letter = (await deadLetters(topic, 1)).get(0)!;
    expect(letter.reasonCode).toBe('declared-length');
    expect(letter.reason).toMatch(/rewards: array declares 2147483647 items/);
    expect(await kafkaStatsCheck(pool, campaignId, topic)).toMatchObject({
      equal: true,
      tasks: 1,
      groups: 1,
    });
  }, 150_000);

  it.each([
    // One death with the record alone: an outside kill -9 looks the same, so it is tried again.
    ['died once on offset 1 alone: tried again and counted', 0, false],
    ['died twice on offset 1 alone: dead-lettered (reader-crashed)', 1, true],
  ])(
    'a range a process died in is folded one record at a time; %s',
    async (_, crashesBefore, dead) => {
      const campaignId = `stuck-crash-${randomUUID().slice(0, 8)}`;
      await registerCampaign(pool, { campaignId });
      const topic = await freshRewardTopic('agg.crash', 1);
      const groupId = `g-${campaignId}`;
      await produceTrace(topic, [
        group(campaignId, 'task-a'),
        group(campaignId, 'task-b'),
        group(campaignId, 'task-c'),
        // The step's groups after offset 0 (which the stored offset below says was counted).
        stepClosed(campaignId, 2),
      ]);
      // What a process that died on offset 1 alone leaves (after crashesBefore earlier deaths
      // there): its marker, written before it decoded anything, and no stored offset past it.
      await pool.query(
        `insert into aggregator_suspects (group_id, topic, partition, from_offset, to_offset, owner, started_at, alone, crashes)
       values ($1, $2, 0, 1, 1, 'a-process-that-died', now() - interval '5 minutes', true, $3)`,
        [groupId, topic, crashesBefore],
      );
      await pool.query(
        `insert into aggregator_offsets (group_id, topic, partition, next_offset) values ($1, $2, 0, 1)`,
        [groupId, topic],
      );
      const stuck = await stuckHeads(pool, groupId, 60);
      expect(stuck).toEqual([
        expect.objectContaining({
          topic,
          partition: 0,
          offset: 1,
          reason: expect.stringMatching(/offsets 1-1 were taken up/),
        }),
      ]);
      // task-a at offset 0 was counted before the crash (the stored offset is past it): it comes
      // again from Kafka and is skipped; task-b is at offset 1.
      await countedUntil(campaignId, topic, 'task-c', true);
      expect((await queryStats(pool, { campaignId })).map((r) => r.taskId)).toEqual(
        dead ? ['task-c'] : ['task-b', 'task-c'],
      );
      if (dead) {
        const letter = (await deadLetters(topic, 1)).get(1)!;
        expect(letter.reasonCode).toBe('reader-crashed');
        expect(letter.reason).toContain('2 processes reading offset 1');
        expect(letter.reason).toContain('a-process-that-died');
      }
      expect(await stuckHeads(pool, groupId, 0)).toEqual([]);
      // Only the crashed range went one record at a time: the records after it (task-c, the step's
      // closing) were folded as one marked batch, the partition's last mark.
      const { rows: marks } = await pool.query(
        'select from_offset::int as "from", to_offset::int as "to", alone from aggregator_suspects where group_id = $1',
        [groupId],
      );
      expect(marks).toEqual([{ from: 2, to: 3, alone: false }]);
    },
    150_000,
  );

  it('`rods partitions skip` moves a partition past its head record, as a dead letter and an event', async () => {
    const campaignId = `stuck-skip-${randomUUID().slice(0, 8)}`;
    await registerCampaign(pool, { campaignId });
    const topic = await freshRewardTopic('agg.skip', 1);
    const groupId = `g-${campaignId}`;
    await produceTrace(topic, [
      group(campaignId, 'task-a'),
      group(campaignId, 'task-b'),
      stepClosed(campaignId, 2),
    ]);
    // The partition waits on offset 0 (no aggregator runs: as if every one hung on that record).
    await pool.query(
      `insert into aggregator_offsets (group_id, topic, partition, next_offset) values ($1, $2, 0, 0)`,
      [groupId, topic],
    );
    const rods = (args: string[]) =>
      execFileP(process.execPath, [path.join(ROOT, 'bin/rods.mjs'), ...args], {
        cwd: ROOT,
        timeout: 120_000,
      }).catch((e: { stdout?: string; stderr?: string; code?: number }) => ({
        stdout: e.stdout ?? '',
        stderr: e.stderr ?? '',
        code: e.code,
      }));
    /** `rods partitions skip` of partition 0 at `offset`, with the reason and any further options. */
    const skip = (offset: string, reason: string, ...more: string[]) =>
      rods([
        'partitions',
        'skip',
        '--topic',
        topic,
        '--group',
        groupId,
        '--partition',
        '0',
        '--offset',
        offset,
        '--reason',
        reason,
        ...more,
      ]);
    const wrong = await skip('1', 'x');
    expect((wrong as { code?: number }).code).toBe(2);
    expect(wrong.stderr).toContain('offset 1 is not at the head of partition 0');
    const r = await skip('0', 'holds the partition', '--actor', 'alice', '--json');
    const out = JSON.parse(r.stdout) as {
      nextOffset: string;
      eventId: string;
      group: { taskId: string; step: number };
    };
    expect(out).toMatchObject({ nextOffset: '1', group: { taskId: 'task-a', step: 1 } });
    const ev = await pool.query<{ payload: { reasonCode: string; reason: string; offset: number } }>(
      `select payload from events where event_id = $1`,
      [out.eventId],
    );
    expect(ev.rows[0]?.payload).toMatchObject({ reasonCode: 'operator-skipped', offset: 0 });
    expect(ev.rows[0]?.payload.reason).toBe('holds the partition (skipped by alice)');
    const letter = (await deadLetters(topic, 1)).get(0)!;
    expect(letter.reasonCode).toBe('operator-skipped');
    // The aggregator resumes after it; the skipped group counts as rejected, so step 1 closes.
    await countedUntil(campaignId, topic, 'task-b', true);
    expect((await queryStats(pool, { campaignId })).map((r2) => r2.taskId)).toEqual(['task-b']);
    expect(await kafkaStatsCheck(pool, campaignId, topic)).toMatchObject({ equal: true, tasks: 1 });
  }, 150_000);
});
