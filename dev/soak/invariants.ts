// What a soak run checks at the end, each as a named invariant with the evidence that decided it.
import type pg from 'pg';
import { verifyManifests } from '../../analysis/manifest/manifest.js';
import { replayCampaign } from '../../analysis/replay/replay.js';
import { campaignStreamPrefixes } from '../../domain/ids.js';
import { decode } from '../../platform/codec/registry.js';
import { openKafka, readToEnd } from '../../platform/kafka/client.js';
import { DLQ_TOPIC } from '../../platform/kafka/dlq.js';
import { lastPlannedStep } from '../../platform/store/campaign-plans.js';
import { verifyChains } from '../../platform/store/events/audit.js';
import { candidateEventCounts } from '../../platform/store/events/campaign-reads.js';
import { candidateStatuses } from '../../platform/store/pool/candidates.js';
import { acceptedBatches } from '../../platform/store/steps/batches.js';
import { stepRows } from '../../platform/store/steps/view.js';
import { queryStats } from '../../platform/store/task-stats/view.js';
import { referenceStats, type TraceGroup } from '../../stages/aggregator/trace.js';
import type { BatchLogEntry } from './trainer.js';

export interface Invariant {
  ok: boolean;
  detail: string;
}

const relDiff = (a: number, b: number) => Math.abs(a - b) / Math.max(Math.abs(b), 1e-12);

/**
 * The groups the campaign accepted, from the trainer's log: batches answered 2xx, and batches
 * whose answer was lost (a 5xx or a dropped connection to a client that does not retry) that the
 * gateway's ingestion_batches table holds: those were committed before the failure.
 */
export async function acceptedGroups(
  db: pg.Pool,
  campaignId: string,
  log: BatchLogEntry[],
): Promise<{ groups: TraceGroup[]; unknownCommitted: number; unknownLost: number }> {
  const stored = new Set((await acceptedBatches(db, campaignId)).map((b) => `${b.step}/${b.batchId}`));
  const seen = new Set<string>();
  const groups: TraceGroup[] = [];
  let unknownCommitted = 0;
  let unknownLost = 0;
  for (const e of log) {
    const key = `${e.step}/${e.batchId}`;
    if (seen.has(key)) continue;
    seen.add(key);
    const committed = stored.has(key);
    if (e.outcome === 'unknown') committed ? unknownCommitted++ : unknownLost++;
    if (e.outcome === 'accepted' || e.outcome === 'duplicate' || (e.outcome === 'unknown' && committed)) {
      e.groups.forEach((g, i) => {
        groups.push({
          eventId: `${key}/${i}`,
          campaignId,
          taskId: g.taskId,
          step: e.step,
          rewards: g.rewards,
        });
      });
    }
  }
  return { groups, unknownCommitted, unknownLost };
}

/** Statistics equal the offline reference: identical counts, means and variances to 1e-9. */
export async function exactlyOnce(db: pg.Pool, campaignId: string, groups: TraceGroup[]): Promise<Invariant> {
  const ref = referenceStats(groups);
  const rows = await queryStats(db, { campaignId });
  const problems: string[] = [];
  const live = new Map(rows.map((r) => [r.taskId, r]));
  for (const [task, e] of ref) {
    const r = live.get(task);
    if (!r) problems.push(`${task}: no statistics, expected ${e.groups} groups`);
    else if (r.groups !== e.groups || r.rollouts !== e.rollouts)
      problems.push(
        `${task}: ${r.groups} groups / ${r.rollouts} rollouts, expected ${e.groups} / ${e.rollouts}`,
      );
    else if (relDiff(r.mean, e.mean) > 1e-9 || Math.abs(r.variance - e.variance) > 1e-9)
      problems.push(`${task}: mean ${r.mean} variance ${r.variance}, expected ${e.mean} / ${e.variance}`);
  }
  for (const r of rows)
    if (!ref.has(r.taskId) && r.groups > 0) problems.push(`${r.taskId}: counted but never accepted`);
  return {
    ok: problems.length === 0,
    detail: problems.length
      ? `${problems.length} tasks differ: ${problems.slice(0, 5).join('; ')}`
      : `${ref.size} tasks, ${groups.length} groups: counts equal, mean and variance within 1e-9`,
  };
}

/** Steps 1..N all closed, each no earlier than the one before, and step N planned. */
export async function stepsClosedInOrder(db: pg.Pool, campaignId: string, steps: number): Promise<Invariant> {
  const rows = (await stepRows(db, campaignId, steps)).map((r) => ({ step: r.step, closed_at: r.closedAt }));
  const planned = await lastPlannedStep(db, campaignId);
  const problems: string[] = [];
  const byStep = new Map(rows.map((r) => [Number(r.step), r.closed_at]));
  let prev = 0;
  for (let s = 1; s <= steps; s++) {
    const at = byStep.get(s);
    if (!at) {
      problems.push(`step ${s} not closed`);
      continue;
    }
    if (at.getTime() < prev) problems.push(`step ${s} closed before step ${s - 1}`);
    prev = at.getTime();
  }
  if (planned < steps) problems.push(`the campaign planned step ${planned}, not ${steps}`);
  return {
    ok: problems.length === 0,
    detail: problems.length
      ? problems.slice(0, 5).join('; ')
      : `steps 1..${steps} closed in order; step ${planned} planned`,
  };
}

/** Every validated candidate validated once, injected at most once, and injected or still queued. */
export async function candidatesOnce(db: pg.Pool, campaignId: string): Promise<Invariant> {
  // Validations and injections per candidate from the log, statuses from the pool's table.
  const counts = await candidateEventCounts(db, campaignId);
  const statuses = await candidateStatuses(db, campaignId);
  const rows = counts.map((c) => ({ ...c, status: statuses.get(c.candidate_id) ?? null }));
  const problems: string[] = [];
  let injected = 0;
  let queued = 0;
  for (const r of rows) {
    if (r.validated !== 1) problems.push(`${r.candidate_id}: validated ${r.validated} times`);
    if (r.injected > 1) problems.push(`${r.candidate_id}: injected ${r.injected} times`);
    if (r.injected === 1) injected++;
    else if (r.status === 'validated') queued++;
    else problems.push(`${r.candidate_id}: neither injected nor queued (status ${r.status})`);
  }
  return {
    ok: problems.length === 0,
    detail: problems.length
      ? problems.slice(0, 5).join('; ')
      : `${rows.length} validated candidates: ${injected} injected once, ${queued} queued`,
  };
}

export async function replayEqualsLive(db: pg.Pool, campaignId: string): Promise<Invariant> {
  const r = await replayCampaign(db, { campaignId, fresh: true });
  const differing = r.tables.filter((t) => !(t as { equal?: boolean }).equal);
  return {
    ok: r.equal,
    detail: r.equal
      ? `${r.events} events replayed; ${r.tables.length} projections equal`
      : `differs: ${JSON.stringify(differing).slice(0, 400)}`,
  };
}

export async function auditClean(db: pg.Pool, campaignId: string): Promise<Invariant> {
  let events = 0;
  for (const prefix of campaignStreamPrefixes(campaignId)) {
    const a = await verifyChains(db, { streamPrefix: prefix });
    if (!a.ok) return { ok: false, detail: JSON.stringify(a).slice(0, 400) };
    events += a.events;
  }
  return { ok: true, detail: `${events} events, every hash chain intact` };
}

export interface PoisonRecord {
  kind: string;
  partition: number;
  offset: string;
}

/**
 * The dead-letter topic holds one record per poison record written, and nothing else. `dump`,
 * when given, receives every dead letter read (the report folder keeps them for diagnosis).
 */
export async function deadLettersExact(
  rewardsTopic: string,
  poison: PoisonRecord[],
  dump?: (letters: unknown[]) => void,
): Promise<Invariant> {
  const found: {
    eventId: string;
    reasonCode: string;
    sourceTopic: string;
    partition: number;
    offset: string;
    dlq?: string;
  }[] = [];
  await readToEnd(
    DLQ_TOPIC,
    (records, partition) => {
      for (const r of records)
        found.push({
          ...(decode(r.value!).payload as unknown as (typeof found)[number]),
          dlq: `${partition}/${r.offset}`,
        });
    },
    { client: openKafka({ clientId: 'rods-soak-check' }), timeoutMs: 120_000 },
  );
  dump?.(found);
  const want = new Set(poison.map((p) => `${rewardsTopic}/${p.partition}/${p.offset}`));
  const got = found.map((d) => `${d.sourceTopic}/${d.partition}/${d.offset}`);
  const extra = found.filter((_, i) => !want.has(got[i]!));
  const missing = [...want].filter((k) => !got.includes(k));
  const dupes = got.length - new Set(got).size;
  const duplicated = found.filter((_, i) => got.indexOf(got[i]!) !== i);
  const ok = extra.length === 0 && missing.length === 0 && dupes === 0;
  const named = (xs: typeof found) =>
    xs
      .slice(0, 3)
      .map((d) => `${d.reasonCode} ${d.sourceTopic}/${d.partition}/${d.offset} at dlq ${d.dlq}`)
      .join('; ');
  return {
    ok,
    detail: ok
      ? `${found.length} dead letters, exactly the ${poison.length} poison records (${[...new Set(found.map((d) => d.reasonCode))].join(', ')})`
      : `extra ${extra.length} (${named(extra)}), missing ${missing.length} (${missing.slice(0, 3).join('; ')}), duplicated ${dupes} (${named(duplicated)})`,
  };
}

/**
 * Every checkpoint the trainer saved was recorded (none waits for ever, the one after a refused
 * step included), with the root its answer gave, and `rods audit verify` recomputes every
 * recorded root from the log.
 */
export async function checkpointsRecorded(
  db: pg.Pool,
  campaignId: string,
  saved: readonly {
    checkpointId: string;
    outcome: string;
    answer?: { manifestRoot: string };
    error?: string;
  }[],
): Promise<Invariant> {
  const checks = await verifyManifests(db, campaignId);
  const byId = new Map(checks.map((c) => [c.checkpointId, c]));
  const problems: string[] = [];
  for (const c of saved) {
    const check = byId.get(c.checkpointId);
    if (c.outcome !== 'recorded')
      problems.push(`${c.checkpointId} ${c.outcome}${c.error ? `: ${c.error}` : ''}`);
    else if (!check) problems.push(`${c.checkpointId} answered but not in the log`);
    else if (check.recordedRoot !== c.answer?.manifestRoot)
      problems.push(
        `${c.checkpointId}: answered root ${c.answer?.manifestRoot}, recorded ${check.recordedRoot}`,
      );
  }
  for (const c of checks) if (!c.ok) problems.push(`${c.checkpointId}: ${c.problem}`);
  if (checks.length !== saved.length) problems.push(`${checks.length} recorded for ${saved.length} saved`);
  return {
    ok: problems.length === 0 && saved.length > 0,
    detail: problems.length
      ? problems.slice(0, 5).join('; ')
      : `${saved.length} checkpoints recorded, each root recomputed from the log by rods audit verify`,
  };
}
