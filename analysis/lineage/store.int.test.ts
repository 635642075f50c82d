// A lineage lookup reads a task's ancestry by task id, not the campaign: against a campaign written
// straight to the event store (seeds, a chain of derived tasks, an Augment variant, a pruned, a
// retired and a queued task, a broken chain, two validations of one candidate, another campaign
// with the same task ids), each task's lineage equals the one an index of every event of the
// campaign gives, and the lookup sends the same queries and reads the same rows after the
// campaign has grown by hundreds of unrelated decisions.
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { streams } from '../../domain/ids.js';
import { createPool } from '../../platform/store/db.js';
import {
  append,
  EVENT_COLUMNS,
  type EventRow,
  type Queryable,
  toEvents,
} from '../../platform/store/events/event-store.js';
import { FINGERPRINT } from '../../test/support/store/events.js';
import { LineageIndex } from './model.js';
import { loadLineageIndex } from './store.js';

const pool = createPool({ application: 'rods-test-lineage-store', max: 4 });
afterAll(() => pool.end());

const C = `lineage-store-${randomUUID()}`;
const OTHER = `lineage-store-other-${randomUUID()}`;
const stats = { mean: 0.5, phi: 1, groupCount: 2, band: 'boundary' };

interface Planned {
  streamId: string;
  type: string;
  payload: Record<string, unknown>;
  metadata?: Record<string, unknown>;
  eventId?: string;
}

/** Appends events in the order given (one append per run of one stream). */
async function write(events: Planned[]): Promise<void> {
  for (let i = 0; i < events.length; ) {
    let j = i;
    while (j < events.length && events[j]!.streamId === events[i]!.streamId) j++;
    await append(
      pool,
      events[i]!.streamId,
      'any',
      events.slice(i, j).map((e) => ({
        eventId: e.eventId ?? randomUUID(),
        type: e.type,
        fingerprint: FINGERPRINT,
        payload: e.payload,
        metadata: e.metadata ?? {},
      })) as never,
    );
    i = j;
  }
}

const seeded = (c: string, taskId: string, poolVersion = 1): Planned => ({
  streamId: streams.campaign(c),
  type: 'TaskSeeded',
  payload: { campaignId: c, taskId, category: 'base', taskHash: `h-${taskId}`, source: 'test', poolVersion },
});

/** Selection, synthesis stream and validation of `child` from `parents` (seed first); injected unless told. */
function derive(
  c: string,
  parents: string[],
  child: string,
  step: number,
  opts: { inject?: boolean; hash?: string; extraValidation?: string } = {},
): Planned[] {
  const sid = `synth:${c}:${step}:${child}`;
  const sel = randomUUID();
  const hash = opts.hash ?? `h-${child}`;
  const validated = (candidateHash: string): Planned => ({
    streamId: streams.synthesis(sid),
    type: 'CandidateValidated',
    payload: {
      campaignId: c,
      synthesisId: sid,
      candidateId: child,
      seedTaskId: parents[0],
      category: 'base',
      candidateHash,
      judgeModel: 'judge',
      judgeScores: { alignment: 1 },
      refined: false,
    },
    metadata: {
      lineage: {
        parents,
        depth: parents.length,
        step,
        policyVersion: `pv-${step}`,
        triggeringStats: stats,
        synthesisId: sid,
        models: { plan: 'gen' },
        promptVersions: { plan: 'p'.repeat(64) },
        stageOutputs: { plan: 'o'.repeat(64) },
        judgeVerdict: 'accept',
        judgeReasons: ['fine'],
      },
    },
  });
  return [
    {
      streamId: streams.campaign(c),
      type: 'SeedSelected',
      eventId: sel,
      payload: {
        campaignId: c,
        seedTaskId: parents[0],
        category: 'base',
        step,
        phi: 0.9,
        quotaSlot: 0,
        stats,
      },
    },
    {
      streamId: streams.synthesis(sid),
      type: 'SynthesisStarted',
      payload: {
        campaignId: c,
        synthesisId: sid,
        seedTaskId: parents[0],
        selectionEventId: sel,
        generatorModel: 'gen',
      },
    },
    ...['plan', 'critique'].map((stage, i) => ({
      streamId: streams.synthesis(sid),
      type: 'StageCompleted',
      payload: {
        campaignId: c,
        synthesisId: sid,
        stage,
        attempt: 1,
        model: i === 0 ? 'gen' : 'judge',
        promptVersionHash: 'p'.repeat(64),
        outputHash: `${i}`.repeat(64),
      },
    })),
    ...(opts.extraValidation ? [validated(opts.extraValidation)] : []),
    validated(hash),
    ...(opts.inject === false
      ? []
      : [
          {
            streamId: streams.campaign(c),
            type: 'TaskInjected',
            payload: {
              campaignId: c,
              taskId: child,
              candidateId: child,
              category: 'base',
              taskHash: hash,
              parents,
              poolVersion: step + 1,
              step: step + 1,
            },
          },
        ]),
  ];
}

const pruned = (c: string, step: number, tasks: string[]): Planned => ({
  streamId: streams.campaign(c),
  type: 'PoolPruned',
  payload: {
    campaignId: c,
    cap: 1,
    generatedBefore: tasks.length + 1,
    pruned: tasks.map((taskId, i) => ({ taskId, phi: 0.1 * (i + 1) })),
    poolVersion: step + 10,
    step,
  },
});

/** `n` more seeds of the campaign, each selected, derived, validated, injected, retired or pruned. */
function noise(c: string, tag: string, n: number): Planned[] {
  const out: Planned[] = [];
  for (let i = 0; i < n; i++) out.push(seeded(c, `${tag}-${i}`, 50 + i));
  for (let i = 0; i < n; i += 10) {
    out.push(...derive(c, [`${tag}-${i}`], `${tag}-${i}~d`, 60 + i));
    out.push({
      streamId: streams.campaign(c),
      type: 'TaskRetired',
      payload: {
        campaignId: c,
        taskId: `${tag}-${i + 1}`,
        rule: 'mastered',
        stats,
        poolVersion: 99,
        step: 60 + i,
      },
    });
  }
  out.push(pruned(c, 200, [`${tag}-2`, `${tag}-3`]));
  return out;
}

// a: seed s; s~a (pruned, with a second PoolPruned naming it later); s~a~b; its Augment variant;
// s~q validated, not injected; seed t retired; u with a parent that has no record; r only retired.
const TASKS = ['s', 's~a', 's~a~b', 's~a~b~miss_param', 's~q', 't', 'u', 'r', 'nope'];

beforeAll(async () => {
  await write([
    seeded(OTHER, 's'),
    ...derive(OTHER, ['s'], 's~a', 1, { hash: 'other-hash' }),
    seeded(C, 's'),
    seeded(C, 't'),
    {
      streamId: `stats-${C}-x-0`,
      type: 'TaskBandChanged',
      payload: { campaignId: C, taskId: 's', from: null, to: 'boundary', step: 1, stats },
    },
    ...derive(C, ['s'], 's~a', 2),
    ...derive(C, ['s~a'], 's~a~b', 4, { extraValidation: 'h-stale' }),
    ...derive(C, ['s~a~b', 's'], 's~a~b~miss_param', 5),
    ...derive(C, ['s'], 's~q', 6, { inject: false }),
    ...derive(C, ['ghost'], 'u', 7),
    {
      streamId: streams.campaign(C),
      type: 'TaskRetired',
      payload: { campaignId: C, taskId: 't', rule: 'mastered', stats, poolVersion: 4, step: 4 },
    },
    {
      streamId: streams.campaign(C),
      type: 'TaskRetired',
      payload: { campaignId: C, taskId: 'r', rule: 'manual', stats: null, poolVersion: 5, step: 5 },
    },
    pruned(C, 8, ['x-1', 's~a']),
    pruned(C, 9, ['s~a']),
    pruned(OTHER, 9, ['s~a~b']),
    ...noise(C, 'n1', 40),
  ]);
});

/** The index of every event of the campaign (what a lookup read before). */
async function wholeCampaign(): Promise<LineageIndex> {
  const { rows } = await pool.query<EventRow>(
    `select ${EVENT_COLUMNS} from events where payload->>'campaignId' = $1 order by transaction_id, position`,
    [C],
  );
  return new LineageIndex(
    C,
    toEvents(rows).map((e) => ({
      ...e,
      payload: e.payload as Record<string, unknown>,
      metadata: e.metadata as Record<string, unknown>,
    })),
  );
}

/** The lineage of each task read the new way, with the queries sent and the rows they returned. */
async function lookups(): Promise<Record<string, { lineage: unknown; queries: string[]; rows: number }>> {
  const out: Record<string, { lineage: unknown; queries: string[]; rows: number }> = {};
  for (const id of TASKS) {
    const queries: string[] = [];
    let rows = 0;
    const db = {
      query: async (...args: Parameters<typeof pool.query>) => {
        queries.push(String(args[0]).replace(/\s+/g, ' ').trim());
        const r = await (pool.query as (...a: unknown[]) => Promise<{ rowCount: number | null }>)(...args);
        rows += r.rowCount ?? 0;
        return r;
      },
    } as unknown as Queryable;
    out[id] = { lineage: (await loadLineageIndex(db, C, id)).lineage(id), queries, rows };
  }
  return out;
}

describe('lineage lookup of one task', () => {
  it('gives the lineage of the whole campaign, reading the ancestry only', async () => {
    const whole = await wholeCampaign();
    const got = await lookups();
    for (const id of TASKS) expect(got[id]!.lineage, id).toEqual(whole.lineage(id));
    // The cases the campaign was built for are there.
    const b = whole.lineage('s~a~b')!;
    expect(b.complete).toBe(true);
    expect(b.root.derivation!.candidateHash).toBe('h-s~a~b');
    expect(b.root.derivation!.selection).not.toBeNull();
    expect(b.root.parents[0]!.life.pruned).toMatchObject({ step: 8, phi: 0.2 });
    expect(b.root.parents[0]!.parents[0]!.life.bandChanges).toHaveLength(1);
    expect(whole.lineage('s~a~b~miss_param')!.root.parents.map((p) => p.taskId)).toEqual(['s~a~b', 's']);
    expect(whole.lineage('s~q')!.root.life.status).toBe('queued');
    expect(whole.lineage('t')!.root.life.retired).toMatchObject({ rule: 'mastered' });
    expect(whole.lineage('u')!.complete).toBe(false);
    expect(whole.lineage('u')!.root.missingParents).toEqual(['ghost']);
    expect(whole.lineage('r')).toBeUndefined();
    expect(whole.lineage('nope')).toBeUndefined();

    // An unknown task costs one query; no lookup reads the campaign's decision stream.
    expect(got.nope!.queries).toHaveLength(1);
    expect(got.r!.queries).toHaveLength(1);
    for (const id of TASKS)
      expect(got[id]!.queries.filter((q) => /stream_id = \$1 and stream_version >= \$2/.test(q))).toEqual([]);
    // s~a~b: three generations of decisions, its synthesis streams, selections, prunings, legacy
    // band changes and the per-step records' newest step.
    expect(got['s~a~b']!.queries).toHaveLength(8);
  });

  it('sends the same queries and reads the same rows after the campaign grew', async () => {
    const before = await lookups();
    await write(noise(C, 'n2', 300));
    const after = await lookups();
    expect(after).toEqual(before);
    const whole = await wholeCampaign();
    for (const id of TASKS) expect(after[id]!.lineage, id).toEqual(whole.lineage(id));
  });
});
