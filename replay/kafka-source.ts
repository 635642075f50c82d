// `rods replay --source kafka`: recompute a campaign's task statistics from the reward topic
// itself (kept forever for this) with the same pure domain code as the aggregator, and compare
// them with the live statistics.
import { randomUUID } from 'node:crypto';
import type pg from 'pg';
import { decode } from '../codec/registry.js';
import { checkGroup } from '../domain/reward-group.js';
import { applyGroup, type TaskState } from '../domain/task-stats.js';
import { consumer, kafka, withAdmin } from '../kafka/client.js';
import { loadCampaign } from '../store/campaigns.js';

export interface KafkaStatsCheck {
  equal: boolean;
  tasks: number;
  groups: number;
  firstDifference?: Record<string, unknown>;
}

export async function kafkaStatsCheck(
  pool: pg.Pool,
  campaignId: string,
  topic: string,
): Promise<KafkaStatsCheck> {
  const campaign = await loadCampaign(pool, campaignId);
  if (!campaign) throw new Error(`unknown campaign ${campaignId}`);
  const ends = await withAdmin((a) => a.fetchTopicOffsets(topic));
  const remaining = new Map(ends.filter((p) => Number(p.high) > 0).map((p) => [p.partition, Number(p.high)]));
  const states = new Map<string, TaskState>();
  const seen = new Set<string>();
  let groups = 0;
  if (remaining.size > 0) {
    const c = consumer(kafka({ clientId: 'rods-replay' }), {
      groupId: `rods-replay-${randomUUID()}`,
      maxBytesPerPartition: 8 << 20,
    });
    await c.connect();
    await c.subscribe({ topic, fromBeginning: true });
    await new Promise<void>((resolve, reject) => {
      c.run({
        eachBatch: async ({ batch, heartbeat }) => {
          for (const m of batch.messages) {
            try {
              const d = decode(m.value!);
              if (
                d.name === 'RolloutGroupScored' &&
                d.payload.campaignId === campaignId &&
                !seen.has(d.payload.eventId.toLowerCase())
              ) {
                const prev = states.get(d.payload.taskId);
                if (!checkGroup(d.payload.rewards, d.payload.step, prev?.lastStep, campaign.config.rewards)) {
                  seen.add(d.payload.eventId.toLowerCase());
                  states.set(
                    d.payload.taskId,
                    applyGroup(prev, d.payload.rewards, d.payload.step, campaign.config.detector).state,
                  );
                  groups++;
                }
              }
            } catch {
              // Undecodable records went to the DLQ in the live pipeline too.
            }
            if (Number(m.offset) + 1 >= (remaining.get(batch.partition) ?? 0))
              remaining.delete(batch.partition);
          }
          await heartbeat();
          if (remaining.size === 0) resolve();
        },
      }).catch(reject);
    });
    await c.disconnect();
  }
  const live = await pool.query<{
    task_id: string;
    groups: number;
    rollouts: number;
    mean: number;
    m2: number;
  }>('select task_id, groups, rollouts, mean, m2 from task_stats where campaign_id = $1', [campaignId]);
  const rel = (a: number, b: number) => (a === b ? 0 : Math.abs(a - b) / Math.max(Math.abs(a), Math.abs(b)));
  let firstDifference: Record<string, unknown> | undefined;
  for (const r of live.rows) {
    const s = states.get(r.task_id);
    const varLive = r.rollouts ? r.m2 / r.rollouts : 0;
    const varKafka = s?.moments.n ? s.moments.m2 / s.moments.n : 0;
    if (
      !s ||
      s.groups !== r.groups ||
      s.moments.n !== r.rollouts ||
      rel(s.moments.mean, r.mean) > 1e-12 ||
      rel(varKafka, varLive) > 1e-12
    ) {
      firstDifference = {
        taskId: r.task_id,
        live: { groups: r.groups, mean: r.mean },
        kafka: s ? { groups: s.groups, mean: s.moments.mean } : null,
      };
      break;
    }
  }
  if (!firstDifference && states.size !== live.rows.length) {
    firstDifference = { tasks: { live: live.rows.length, kafka: states.size } };
  }
  return {
    equal: !firstDifference,
    tasks: states.size,
    groups,
    ...(firstDifference ? { firstDifference } : {}),
  };
}
