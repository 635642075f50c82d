// One consumed batch (one partition) applied exactly once: decode, validate, dedupe, fold into
// the task statistics, and commit state + emitted events + the partition's next offset in one
// PostgreSQL transaction.
//
// Why a group never counts twice:
// - the partition's next offset lives in aggregator_offsets and is read under a per-partition
//   advisory lock: a record below it was applied already (a redelivery after a crash or a
//   rebalance) and is skipped, and two members briefly owning one partition serialise here;
// - every applied group's event id joins its task's dedupe window (the ids of the task's last
//   N groups, stored in the task's row in the same transaction), so a duplicate produced later
//   by a retrying producer (another offset, same id, same task) is skipped too.
// Nothing is applied or emitted unless the whole transaction commits.
import type pg from 'pg';
import type { SchemaRegistry } from '../codec/registry.js';
import type { Band } from '../domain/band.js';
import type { CampaignConfig } from '../domain/campaign-config.js';
import { checkGroup, type Rejection } from '../domain/reward-group.js';
import { addToTally, emptyTally, type StepTally } from '../domain/step-tally.js';
import { applyGroup, statsRecord, type TaskState } from '../domain/task-stats.js';
import type { KafkaMessage } from '../kafka/client.js';
import { decodeOrReason } from '../kafka/dlq.js';
import { type CampaignRow, loadCampaign } from '../store/campaigns.js';
import { append, type NewEvent, StreamOrderError } from '../store/event-store.js';
import { derivedUuid } from '../util/ids.js';

export interface DeadLetterNote {
  offset: string;
  code: string;
  reason: string;
  key: Buffer | null;
  value: Buffer | null;
}

export interface BatchResult {
  applied: number;
  duplicates: number;
  rejected: number;
  /** Records below the stored next offset (already applied by an earlier delivery). */
  skipped: number;
  /** Steps whose progress moved (candidates for closing). */
  steps: { campaignId: string; step: number }[];
  nextOffset: string | null;
  events: number;
}

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

export const statsStream = (campaignId: string, topic: string, partition: number) =>
  `stats-${campaignId}-${topic}-${partition}`;

interface StoredRow {
  campaign_id: string;
  task_id: string;
  groups: number;
  rollouts: number;
  mean: number;
  m2: number;
  latest_mean: number;
  latest_variance: number;
  ewma: number;
  recent_means: number[];
  last_step: number;
  signal: number;
  phi: number;
  band: Band;
  recent_event_ids: string[];
}

function fromRow(r: StoredRow): TaskState {
  return {
    groups: r.groups,
    moments: { n: r.rollouts, mean: r.mean, m2: r.m2 },
    latestMean: r.latest_mean,
    latestVariance: r.latest_variance,
    ewma: r.ewma,
    recentMeans: r.recent_means,
    lastStep: r.last_step,
    signal: r.signal,
    phi: r.phi,
    band: r.band,
  };
}

/** Campaign lookups are cached; an unknown id is looked up again after a short while. */
export class CampaignCache {
  private readonly known = new Map<string, CampaignRow>();
  private readonly missing = new Map<string, number>();
  constructor(
    private readonly pool: pg.Pool,
    private readonly retryMs = 2000,
  ) {}

  async get(campaignId: string): Promise<CampaignRow | undefined> {
    const hit = this.known.get(campaignId);
    if (hit) return hit;
    const missedAt = this.missing.get(campaignId);
    if (missedAt !== undefined && Date.now() - missedAt < this.retryMs) return undefined;
    const row = await loadCampaign(this.pool, campaignId);
    if (row) {
      this.known.set(campaignId, row);
      this.missing.delete(campaignId);
    } else this.missing.set(campaignId, Date.now());
    return row;
  }

  forget(campaignId: string): void {
    this.known.delete(campaignId);
  }
}

export interface ApplyBatchDeps {
  pool: pg.Pool;
  registry: SchemaRegistry;
  campaigns: CampaignCache;
  groupId: string;
  /** Publishes the batch's dead letters; must resolve before the transaction commits. */
  deadLetter: (notes: DeadLetterNote[]) => Promise<void>;
  /** Groups per task whose event ids are remembered for duplicate detection; default 64. */
  dedupeWindow?: number;
  now?: () => number;
}

interface Group {
  offset: string;
  eventId: string;
  campaignId: string;
  taskId: string;
  step: number;
  rewards: number[];
  policyVersion: string;
  message: KafkaMessage;
}

interface Closing {
  offset: string;
  campaignId: string;
  step: number;
  groupCount: number;
}

/** Applies one batch of one partition. Retries itself on a StreamOrderError (a benign race). */
export async function applyBatch(
  deps: ApplyBatchDeps,
  topic: string,
  partition: number,
  messages: KafkaMessage[],
): Promise<BatchResult> {
  for (let attempt = 0; ; attempt++) {
    try {
      return await applyOnce(deps, topic, partition, messages);
    } catch (e) {
      if (e instanceof StreamOrderError && attempt < 5) continue;
      throw e;
    }
  }
}

async function applyOnce(
  deps: ApplyBatchDeps,
  topic: string,
  partition: number,
  messages: KafkaMessage[],
): Promise<BatchResult> {
  const now = deps.now ?? Date.now;
  const dead: DeadLetterNote[] = [];
  const groups: Group[] = [];
  const closings: Closing[] = [];
  const reject = (m: KafkaMessage, code: string, reason: string) =>
    dead.push({ offset: m.offset, code, reason, key: m.key, value: m.value });

  // Decode outside the transaction: pure CPU.
  for (const m of messages) {
    const r = decodeOrReason(
      { topic, partition, message: m },
      { registry: deps.registry, accept: ['RolloutGroupScored', 'StepClosed'] },
    );
    if (!('decoded' in r)) {
      reject(m, r.code, r.reason);
      continue;
    }
    const d = r.decoded;
    if (d.name === 'RolloutGroupScored') {
      const p = d.payload;
      if (!UUID.test(p.eventId)) {
        reject(m, 'bad-event-id', `eventId ${JSON.stringify(p.eventId)} is not a UUID`);
        continue;
      }
      groups.push({
        offset: m.offset,
        eventId: p.eventId.toLowerCase(),
        campaignId: p.campaignId,
        taskId: p.taskId,
        step: p.step,
        rewards: p.rewards,
        policyVersion: p.policyVersion,
        message: m,
      });
    } else if (d.name === 'StepClosed') {
      closings.push({
        offset: m.offset,
        campaignId: d.payload.campaignId,
        step: d.payload.step,
        groupCount: d.payload.groupCount,
      });
    }
  }

  const campaigns = new Map<string, CampaignRow | undefined>();
  for (const id of new Set([...groups.map((g) => g.campaignId), ...closings.map((c) => c.campaignId)])) {
    campaigns.set(id, await deps.campaigns.get(id));
  }
  const client = await deps.pool.connect();
  try {
    await client.query('begin');
    // Partition ownership for the length of the transaction (no write yet: see store/event-store.ts).
    await client.query('select pg_advisory_xact_lock(hashtextextended($1, 0))', [
      `rods-aggregator:${deps.groupId}:${topic}:${partition}`,
    ]);
    const stored = await client.query<{ next_offset: number }>(
      'select next_offset from aggregator_offsets where group_id = $1 and topic = $2 and partition = $3',
      [deps.groupId, topic, partition],
    );
    const from = stored.rows[0]?.next_offset ?? -1;
    const fresh = (offset: string) => Number(offset) >= from;
    const skipped = messages.filter((m) => !fresh(m.offset)).length;
    const liveGroups = groups.filter((g) => fresh(g.offset));
    const liveClosings = closings.filter((c) => fresh(c.offset));
    const liveDead = dead.filter((d) => fresh(d.offset));
    // Current state of the tasks the batch touches.
    const states = new Map<string, TaskState>();
    const recentIds = new Map<string, string[]>();
    const window = deps.dedupeWindow ?? 64;
    const key = (c: string, t: string) => `${c}\u0000${t}`;
    if (liveGroups.length > 0) {
      const pairs = [...new Map(liveGroups.map((g) => [key(g.campaignId, g.taskId), g])).values()];
      const r = await client.query<StoredRow>(
        `select s.* from task_stats s
           join unnest($1::text[], $2::text[]) as k(campaign_id, task_id) using (campaign_id, task_id)`,
        [pairs.map((g) => g.campaignId), pairs.map((g) => g.taskId)],
      );
      for (const row of r.rows) {
        states.set(key(row.campaign_id, row.task_id), fromRow(row));
        recentIds.set(key(row.campaign_id, row.task_id), row.recent_event_ids);
      }
    }
    // Fold the groups in offset order (per task, the order the trainer produced them).
    const touched = new Map<
      string,
      { campaignId: string; taskId: string; lastEventId: string; policyVersion: string }
    >();
    const events = new Map<string, NewEvent[]>(); // campaign -> events
    const tallies = new Map<
      string,
      { campaignId: string; step: number; tally: StepTally; rejected: number }
    >();
    const tallyOf = (campaignId: string, step: number) => {
      const k = `${campaignId}\u0000${step}`;
      let t = tallies.get(k);
      if (!t) {
        t = { campaignId, step, tally: emptyTally(), rejected: 0 };
        tallies.set(k, t);
      }
      return t;
    };
    const emit = (campaignId: string, type: string, payload: Record<string, unknown>) => {
      const list = events.get(campaignId) ?? [];
      list.push({
        eventId: payload.eventId as string,
        type,
        fingerprint: deps.registry.current(type)!.fingerprint,
        payload,
        metadata: { producer: 'rods-aggregator', causationId: payload.sourceEventId as string | undefined },
      });
      events.set(campaignId, list);
    };
    let applied = 0;
    let duplicates = 0;
    for (const g of liveGroups) {
      const ids = recentIds.get(key(g.campaignId, g.taskId));
      if (ids?.includes(g.eventId)) {
        duplicates++;
        continue;
      }
      const campaign = campaigns.get(g.campaignId);
      if (!campaign) {
        liveDead.push({
          offset: g.offset,
          code: 'unknown-campaign',
          reason: `campaign ${JSON.stringify(g.campaignId)} is not registered`,
          key: g.message.key,
          value: g.message.value,
        });
        continue;
      }
      const cfg: CampaignConfig = campaign.config;
      const k = key(g.campaignId, g.taskId);
      const prev = states.get(k);
      const rejection: Rejection | null = checkGroup(g.rewards, g.step, prev?.lastStep, cfg.rewards);
      if (rejection) {
        liveDead.push({
          offset: g.offset,
          code: rejection.code,
          reason: `${g.taskId} step ${g.step}: ${rejection.reason}`,
          key: g.message.key,
          value: g.message.value,
        });
        tallyOf(g.campaignId, g.step).rejected++;
        continue;
      }
      // The task's window, updated in place (this batch owns the array it loaded).
      if (ids) {
        ids.push(g.eventId);
        if (ids.length > window) ids.splice(0, ids.length - window);
      } else recentIds.set(k, [g.eventId]);
      const r = applyGroup(prev, g.rewards, g.step, cfg.detector);
      states.set(k, r.state);
      applied++;
      touched.set(k, {
        campaignId: g.campaignId,
        taskId: g.taskId,
        lastEventId: g.eventId,
        policyVersion: g.policyVersion,
      });
      const t = tallyOf(g.campaignId, g.step);
      t.tally = addToTally(t.tally, r.state.band, r.group.variance);
      if (r.bandChange) {
        emit(g.campaignId, 'TaskBandChanged', {
          eventId: derivedUuid('TaskBandChanged', g.eventId),
          campaignId: g.campaignId,
          taskId: g.taskId,
          from: r.bandChange.from,
          to: r.bandChange.to,
          step: g.step,
          stats: statsRecord(r.state),
          occurredAt: now(),
        });
      }
    }
    // The latest statistics of each task touched (coalesced per batch: the topic is compacted).
    for (const [k, t] of touched) {
      emit(t.campaignId, 'TaskStatsUpdated', {
        eventId: derivedUuid('TaskStatsUpdated', t.lastEventId),
        campaignId: t.campaignId,
        taskId: t.taskId,
        stats: statsRecord(states.get(k)!),
        sourceEventId: t.lastEventId,
        occurredAt: now(),
      });
    }
    for (const c of liveClosings) {
      if (!campaigns.get(c.campaignId)) {
        const m = messages.find((x) => x.offset === c.offset)!;
        liveDead.push({
          offset: c.offset,
          code: 'unknown-campaign',
          reason: `campaign ${JSON.stringify(c.campaignId)} is not registered`,
          key: m.key,
          value: m.value,
        });
      }
    }
    // Events first (the store's rule for transactions that also write other rows).
    let eventCount = 0;
    for (const [campaignId, list] of events) {
      await append(client, statsStream(campaignId, topic, partition), 'any', list);
      eventCount += list.length;
    }
    if (touched.size > 0)
      await upsertStats(
        client,
        [...touched].map(([k, t]) => ({ ...t, state: states.get(k)!, recentIds: recentIds.get(k)! })),
      );
    if (tallies.size > 0) {
      // One statement for all steps the batch touched, in key order (no lock-order inversions).
      const ts = [...tallies.values()].sort(
        (a, b) => a.campaignId.localeCompare(b.campaignId) || a.step - b.step,
      );
      const band = (b: Band, f: 'tasks' | 'varianceSum') => ts.map((t) => t.tally[b][f]);
      await client.query(
        `insert into step_progress (campaign_id, step, topic, partition, groups_applied, groups_rejected,
            hard_tasks, hard_var_sum, boundary_tasks, boundary_var_sum, mastered_tasks, mastered_var_sum)
         select c, st, $3, $4, ga, gr, ht, hv, bt, bv, mt, mv
           from unnest($1::text[], $2::bigint[], $5::bigint[], $6::bigint[], $7::bigint[], $8::float8[],
                       $9::bigint[], $10::float8[], $11::bigint[], $12::float8[])
             as u(c, st, ga, gr, ht, hv, bt, bv, mt, mv)
         on conflict (campaign_id, step, topic, partition) do update set
           groups_applied = step_progress.groups_applied + excluded.groups_applied,
           groups_rejected = step_progress.groups_rejected + excluded.groups_rejected,
           hard_tasks = step_progress.hard_tasks + excluded.hard_tasks,
           hard_var_sum = step_progress.hard_var_sum + excluded.hard_var_sum,
           boundary_tasks = step_progress.boundary_tasks + excluded.boundary_tasks,
           boundary_var_sum = step_progress.boundary_var_sum + excluded.boundary_var_sum,
           mastered_tasks = step_progress.mastered_tasks + excluded.mastered_tasks,
           mastered_var_sum = step_progress.mastered_var_sum + excluded.mastered_var_sum`,
        [
          ts.map((t) => t.campaignId),
          ts.map((t) => t.step),
          topic,
          partition,
          ts.map((t) => t.tally.groups),
          ts.map((t) => t.rejected),
          band('hard', 'tasks'),
          band('hard', 'varianceSum'),
          band('boundary', 'tasks'),
          band('boundary', 'varianceSum'),
          band('mastered', 'tasks'),
          band('mastered', 'varianceSum'),
        ],
      );
      await client.query(
        `insert into steps (campaign_id, step) select * from unnest($1::text[], $2::bigint[])
         on conflict do nothing`,
        [ts.map((t) => t.campaignId), ts.map((t) => t.step)],
      );
    }
    for (const c of liveClosings.filter((x) => campaigns.get(x.campaignId))) {
      await client.query(
        `insert into steps (campaign_id, step, declared_groups) values ($1, $2, $3)
         on conflict (campaign_id, step) do update set declared_groups = excluded.declared_groups`,
        [c.campaignId, c.step, c.groupCount],
      );
    }
    const last = messages[messages.length - 1];
    const nextOffset = last ? String(Number(last.offset) + 1) : null;
    if (nextOffset !== null && Number(nextOffset) > from) {
      await client.query(
        `insert into aggregator_offsets (group_id, topic, partition, next_offset) values ($1, $2, $3, $4)
         on conflict (group_id, topic, partition) do update set next_offset = excluded.next_offset, updated_at = now()`,
        [deps.groupId, topic, partition, nextOffset],
      );
    }
    // Dead letters go out before the commit: a crash in between re-sends them with the same ids.
    liveDead.sort((a, b) => Number(a.offset) - Number(b.offset));
    if (liveDead.length > 0) await deps.deadLetter(liveDead);
    await client.query('commit');
    const steps = [
      ...new Map(
        [...tallies.values(), ...liveClosings].map((t) => [
          `${t.campaignId}\u0000${t.step}`,
          { campaignId: t.campaignId, step: t.step },
        ]),
      ).values(),
    ];
    return { applied, duplicates, rejected: liveDead.length, skipped, steps, nextOffset, events: eventCount };
  } catch (e) {
    await client.query('rollback').catch(() => {});
    throw e;
  } finally {
    client.release();
  }
}

// Ragged arrays (recent means, recent ids) travel as PostgreSQL array literals, one per row.
const pgArray = (xs: readonly (string | number)[]) => `{${xs.join(',')}}`;

async function upsertStats(
  client: pg.PoolClient,
  rows: {
    campaignId: string;
    taskId: string;
    lastEventId: string;
    policyVersion: string;
    state: TaskState;
    recentIds: string[];
  }[],
): Promise<void> {
  const col = <T>(f: (r: (typeof rows)[number]) => T) => rows.map(f);
  await client.query(
    `insert into task_stats (campaign_id, task_id, groups, rollouts, mean, m2, latest_mean, latest_variance, ewma,
        recent_means, last_step, signal, phi, band, last_event_id, recent_event_ids, last_policy_version, updated_at)
     select c, t, g, n, mean, m2, lm, lv, ewma, rm::float8[], ls, sig, phi, band, eid, ri::uuid[], pv, now()
       from unnest($1::text[], $2::text[], $3::bigint[], $4::bigint[], $5::float8[], $6::float8[], $7::float8[],
                   $8::float8[], $9::float8[], $10::text[], $11::bigint[], $12::float8[], $13::float8[], $14::text[],
                   $15::uuid[], $16::text[], $17::text[])
         as u(c, t, g, n, mean, m2, lm, lv, ewma, rm, ls, sig, phi, band, eid, ri, pv)
     on conflict (campaign_id, task_id) do update set
       groups = excluded.groups, rollouts = excluded.rollouts, mean = excluded.mean, m2 = excluded.m2,
       latest_mean = excluded.latest_mean, latest_variance = excluded.latest_variance, ewma = excluded.ewma,
       recent_means = excluded.recent_means, last_step = excluded.last_step, signal = excluded.signal,
       phi = excluded.phi, band = excluded.band, last_event_id = excluded.last_event_id,
       recent_event_ids = excluded.recent_event_ids, last_policy_version = excluded.last_policy_version,
       updated_at = now()`,
    [
      col((r) => r.campaignId),
      col((r) => r.taskId),
      col((r) => r.state.groups),
      col((r) => r.state.moments.n),
      col((r) => r.state.moments.mean),
      col((r) => r.state.moments.m2),
      col((r) => r.state.latestMean),
      col((r) => r.state.latestVariance),
      col((r) => r.state.ewma),
      col((r) => pgArray(r.state.recentMeans)),
      col((r) => r.state.lastStep),
      col((r) => r.state.signal),
      col((r) => r.state.phi),
      col((r) => r.state.band),
      col((r) => r.lastEventId),
      col((r) => pgArray(r.recentIds)),
      col((r) => r.policyVersion),
    ],
  );
}
