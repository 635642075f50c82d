// One campaign's records that cannot be folded, ahead of another campaign's step on the same
// partition: how long the other campaign's step takes to close. Campaign `failing` writes
// `burst` groups that a trigger makes the store refuse (as any fault of its own data or state
// would: the aggregator cannot tell it from a bug); campaign `healthy` writes one step of `tasks`
// groups and its StepClosed after them. Used by stages/aggregator/isolation.int.test.ts (behaviour)
// and `npm run bench -- isolation` (the delay, against the same layout with nothing failing).
import { randomUUID } from 'node:crypto';
import type pg from 'pg';
import { encode } from '../../../platform/codec/registry.js';
import { registerCampaign } from '../../../platform/store/campaigns.js';
import { watermark } from '../../../platform/store/steps/watermark.js';
import { AggregatorService } from '../../../stages/aggregator/service.js';
import { freshRewardTopic, produceTrace, rewardGroupRecord } from '../../../stages/aggregator/trace.js';

export interface BurstOptions {
  pool: pg.Pool;
  /** A pool of the tables' owner (it creates and drops the trigger). */
  owner: pg.Pool;
  /** Records of the failing campaign ahead of the healthy step. */
  burst: number;
  /** Tasks in the healthy campaign's step. */
  tasks: number;
  /** false: the same layout, nothing refused (the baseline). */
  failing: boolean;
  /** Gives up after this long (ms). */
  timeoutMs?: number;
}

export interface BurstResult {
  /** From the aggregator's start to the healthy campaign's step 1 closed. */
  healthyStepClosedMs: number;
  /** From the aggregator's start to every failing record dead-lettered (nothing left parked). */
  failingResolvedMs: number;
  failingCampaign: string;
  healthyCampaign: string;
  topic: string;
  records: number;
}

/**
 * Makes the store refuse task statistics rows matching `when` (a SQL condition on `new`), as a
 * fault of a campaign's own data or state would; returns what removes it. Needs the tables' owner.
 */
export async function refuseTaskStats(
  owner: pg.Pool,
  name: string,
  when: string,
): Promise<() => Promise<void>> {
  const fn = `rods_test_fail_${name.replace(/[^a-z0-9_]/gi, '_')}`;
  await owner.query(
    `create function ${fn}() returns trigger language plpgsql as $$
     begin raise exception 'injected failure for %', new.task_id; end $$`,
  );
  await owner.query(
    `create trigger ${fn} before insert or update on task_stats for each row when (${when}) execute function ${fn}()`,
  );
  return async () => {
    await owner.query(`drop trigger if exists ${fn} on task_stats`);
    await owner.query(`drop function if exists ${fn}()`);
  };
}

export async function runFailingBurst(o: BurstOptions): Promise<BurstResult> {
  const tag = randomUUID().slice(0, 8);
  const failingCampaign = `burst-failing-${tag}`;
  const healthyCampaign = `burst-healthy-${tag}`;
  for (const campaignId of [failingCampaign, healthyCampaign])
    await registerCampaign(o.pool, { campaignId, config: { ingestion: { unknownTasks: 'accept' } } });
  // One partition: the worst case, every record of both campaigns in one line.
  const topic = await freshRewardTopic('agg.burst', 1);
  const remove = o.failing
    ? await refuseTaskStats(o.owner, `burst_${tag}`, `new.campaign_id = '${failingCampaign}'`)
    : undefined;
  const records = [
    // Spread over steps and tasks, as a trainer's would be.
    ...Array.from({ length: o.burst }, (_, i) =>
      rewardGroupRecord(failingCampaign, `task-${i % 500}`, { step: 1 + Math.floor(i / 500) }),
    ),
    ...Array.from({ length: o.tasks }, (_, t) => rewardGroupRecord(healthyCampaign, `task-${t}`)),
    {
      key: `${healthyCampaign}/step-close`,
      value: encode('StepClosed', {
        eventId: randomUUID(),
        campaignId: healthyCampaign,
        step: 1,
        groupCount: o.tasks,
        producedAt: 1,
      }),
    },
  ];
  await produceTrace(topic, records);
  const svc = new AggregatorService(o.pool, {
    groupId: `g-${tag}`,
    topic,
    logLevel: (process.env.RODS_TEST_LOG_LEVEL as 'silent') ?? 'silent',
  });
  const t0 = performance.now();
  await svc.start();
  try {
    const deadline = t0 + (o.timeoutMs ?? 600_000);
    const until = async (what: string, done: () => Promise<boolean>): Promise<number> => {
      for (;;) {
        if (await done()) return Math.round(performance.now() - t0);
        if (performance.now() > deadline) throw new Error(`${what} not within ${o.timeoutMs ?? 600_000} ms`);
        await new Promise((r) => setTimeout(r, 50));
      }
    };
    const healthyStepClosedMs = await until(`${healthyCampaign} step 1 closed`, async () => {
      return (await watermark(o.pool, healthyCampaign, 1)).reached;
    });
    // The failing campaign's records: all dead-lettered (its park empty, its failures resolved).
    const failingResolvedMs = await until(`${failingCampaign} resolved`, async () => {
      const { rows } = await o.pool.query<{ n: number }>(
        `select (select count(*) from aggregator_parked where campaign_id = $1)
              + (select count(*) from aggregator_offsets where topic = $2 and next_offset < $3) as n`,
        [failingCampaign, topic, records.length],
      );
      return Number(rows[0]!.n) === 0;
    });
    return {
      healthyStepClosedMs,
      failingResolvedMs,
      failingCampaign,
      healthyCampaign,
      topic,
      records: records.length,
    };
  } finally {
    await svc.stop();
    await remove?.();
  }
}
