// The synthesis funnel's projection against the query it replaces (every event of the campaign,
// kept here as the reference): the same rows for runs with re-plans, repairs, Augment variants, a
// run whose seed id ends in ~miss_param, rejections of one reason at two stages; a batch appended
// again counts nothing; the migration's backfill gives the projection's rows. A failed stage's
// tokens (StageFailed) join the cost ledger once. And the synthesis latencies: the newest runs, as
// the query over every event gave them.
import { randomUUID } from 'node:crypto';
import type pg from 'pg';
import { afterAll, describe, expect, inject, it } from 'vitest';
import { workerEvent } from '../../../activities/events.js';
import { generatorCost, synthesisFunnel } from '../../../analysis/status/funnel.js';
import { eventIds, streams } from '../../../domain/ids.js';
import { migrationUp, withScratchSchema } from '../../../test/support/store/migration-scratch.js';
import { promptVersion } from '../../config/prompts.js';
import { insertPlan } from '../campaign-plans.js';
import { createPool } from '../db.js';
import { synthesisLatencyRows } from '../events/campaign-reads.js';
import type { NewEvent } from '../events/event-store.js';
import { type FunnelRow, synthesisFunnelRows, synthesisTokens } from './funnel.js';
import { recordEvents } from './projection.js';

const pool = createPool({ application: 'rods-funnel-test', max: 2 });
const endpoints = inject('endpoints');
// The backfill runs in a scratch schema, which only the owner role may create.
const owner = createPool({
  connectionString: endpoints.ownerDatabaseUrl ?? endpoints.databaseUrl,
  application: 'rods-funnel-test-owner',
  max: 1,
});
afterAll(() => Promise.all([pool.end(), owner.end()]));

/** The funnel's query before the projection: every funnel event of the campaign. */
async function referenceRows(db: pg.Pool, campaignId: string, repairPromptHash: string) {
  const { rows } = await db.query<FunnelRow>(
    `with campaign_events as (
       select type, payload from events
        where payload->>'campaignId' = $1
          and type in ('SynthesisStarted', 'SeedSelected', 'StageCompleted', 'CandidateValidated',
                       'CandidateRejected', 'TaskInjected')
     ), runs as (
       select payload->>'synthesisId' as id from campaign_events where type = 'SynthesisStarted'
     )
     select type,
            payload->>'stage' as stage,
            case when type = 'StageCompleted' then
              case when payload->>'promptVersionHash' = $2 then 'repair'
                   when payload->>'model' is null then 'no-model' else 'model' end
                 when type = 'CandidateRejected' then payload->>'reasonCode' end as key,
            (case when type = 'StageCompleted'
                  then count(distinct case when payload->>'synthesisId' in (select id from runs)
                                           then payload->>'synthesisId'
                                           else regexp_replace(payload->>'synthesisId', '~(miss_func|miss_param)$', '') end)
                  else count(*) end)::int as n
       from campaign_events
      where type <> 'SynthesisStarted'
      group by 1, 2, 3`,
    [campaignId, repairPromptHash],
  );
  return rows;
}

/** The latencies' query before the bound: every run of the campaign. */
async function referenceLatencies(db: pg.Pool, campaignId: string) {
  const { rows } = await db.query(
    `with started as (
       select payload->>'synthesisId' as id, payload->>'seedTaskId' as seed, recorded_at,
              case when payload->>'selectionEventId' ~* '^[0-9a-f-]{36}$'
                   then (payload->>'selectionEventId')::uuid end as selection
         from events where payload->>'campaignId' = $1 and type = 'SynthesisStarted'
     ), outcomes as (
       select distinct on (payload->>'synthesisId') payload->>'synthesisId' as id, type,
              payload->>'reasonCode' as reason, recorded_at
         from events
        where payload->>'campaignId' = $1 and type in ('CandidateValidated', 'CandidateRejected')
        order by payload->>'synthesisId', transaction_id, position
     )
     select s.id as synthesis_id, s.seed, sel.payload->>'step' as step, o.type, o.reason,
            (extract(epoch from (o.recorded_at - s.recorded_at)) * 1000)::float8 as ms
       from started s join outcomes o on o.id = s.id
       left join events sel on sel.event_id = s.selection
      order by o.recorded_at`,
    [campaignId],
  );
  return rows;
}

const sorted = (rows: FunnelRow[]) =>
  rows
    .filter((r) => r.n > 0)
    .map((r) => `${r.type} ${r.stage} ${r.key} ${r.n}`)
    .sort();

const R = promptVersion('config-patch');
const H = {
  plan: 'a'.repeat(64),
  params: 'b'.repeat(64),
  rewrite: 'c'.repeat(64),
  judge: 'd'.repeat(64),
  judge2: 'e'.repeat(64),
  augment: 'f'.repeat(64),
};
const stats = {
  groupCount: 2,
  count: 32,
  mean: 0.5,
  m2: 1,
  variance: 0.03,
  latestGroupMean: 0.5,
  latestGroupVariance: 0.03,
  ewma: 0.5,
  signal: 0.5,
  phi: 1,
  band: 'boundary' as const,
  lastStep: 1,
};

describe('synthesis funnel projection', () => {
  it('counts what the query over every event counted, once per event, as the backfill does', async () => {
    const C = `funnel-${randomUUID().slice(0, 8)}`;
    const at = { campaignId: C, occurredAt: Date.now() };
    const sid = (name: string) => `${C}:1:${name}`;
    const seeds = ['s1', 's2', 's3', 's3~miss_param', 's4'];
    const selections = Object.fromEntries(seeds.map((s) => [s, randomUUID()]));
    const selected = seeds.map((s) =>
      workerEvent('SeedSelected', selections[s]!, {
        ...at,
        seedTaskId: s,
        category: 'base',
        step: 1,
        phi: 1,
        quotaSlot: 0,
        stats,
      }),
    );
    await recordEvents(pool, streams.campaign(C), selected);
    // Runs: A (s1) with two variants, B (s2), D (s3), M (seed s3~miss_param: its id ends like a
    // variant's but it has its own start), E (s4).
    const runs = { A: 's1', B: 's2', D: 's3', M: 's3~miss_param', E: 's4' };
    for (const [, seed] of Object.entries(runs))
      await recordEvents(pool, streams.synthesis(sid(seed)), [
        workerEvent('SynthesisStarted', randomUUID(), {
          ...at,
          synthesisId: sid(seed),
          seedTaskId: seed,
          selectionEventId: selections[seed]!,
          generatorModel: 'gen',
        }),
      ]);
    let attempt = 0;
    const stage = (
      synthesisId: string,
      s: 'plan' | 'execute' | 'rewrite' | 'critique' | 'refine' | 'augment',
      model: string | null,
      hash: string | null,
    ) =>
      workerEvent('StageCompleted', randomUUID(), {
        ...at,
        synthesisId,
        stage: s,
        attempt: ++attempt,
        model,
        promptVersionHash: hash,
        // A model call's tokens (as a v2 event reports them); a stage without a model has none.
        promptTokens: model === null ? null : 100,
        completionTokens: model === null ? null : 20,
        outputHash: 'o'.repeat(64),
      });
    const validated = (synthesisId: string, seedTaskId: string, candidateId: string) =>
      workerEvent('CandidateValidated', randomUUID(), {
        ...at,
        synthesisId,
        seedTaskId,
        candidateId,
        category: 'base',
        candidate: '{}',
        candidateHash: randomUUID(),
        judgeModel: 'judge',
        judgeScores: {},
        refined: false,
      });
    const rejected = (
      synthesisId: string,
      seedTaskId: string,
      s: 'plan' | 'execute' | 'rewrite' | 'critique',
      reasonCode: string,
    ) =>
      workerEvent('CandidateRejected', randomUUID(), {
        ...at,
        synthesisId,
        seedTaskId,
        candidateId: null,
        stage: s,
        reasonCode,
        reason: 'test',
      });
    const A = sid('s1');
    const record = async (synthesisId: string, events: NewEvent[]) => {
      // One transaction per event, as the activities record them.
      for (const e of events) await recordEvents(pool, streams.synthesis(synthesisId), [e]);
    };
    // A: a re-plan, parameters, the environment twice around a repair, the judge after the gates.
    await record(A, [
      stage(A, 'plan', 'gen', H.plan),
      stage(A, 'plan', 'gen', H.plan),
      stage(A, 'execute', 'gen', H.params),
      stage(A, 'execute', null, null),
      stage(A, 'execute', 'gen', R),
      stage(A, 'execute', null, null),
      stage(A, 'rewrite', 'gen', H.rewrite),
      stage(A, 'critique', null, null),
      stage(A, 'critique', 'judge', H.judge),
      stage(A, 'augment', 'gen', H.augment),
      validated(A, 's1', 's1~s1'),
    ]);
    const AF = `${A}~miss_func`;
    const AP = `${A}~miss_param`;
    await record(AF, [
      stage(AF, 'execute', null, null),
      stage(AF, 'critique', null, null),
      stage(AF, 'critique', 'judge', H.judge),
      validated(AF, 's1', 's1~s1~miss_func'),
    ]);
    await record(AP, [stage(AP, 'execute', null, null), rejected(AP, 's1', 'critique', 'gate-failed')]);
    const B = sid('s2');
    await record(B, [
      stage(B, 'plan', 'gen', H.plan),
      stage(B, 'execute', 'gen', H.params),
      // a model call recorded without a prompt hash
      stage(B, 'refine', 'gen', null),
      rejected(B, 's2', 'execute', 'execute.repairs-exhausted'),
    ]);
    const D = sid('s3');
    await record(D, [stage(D, 'plan', 'gen', H.plan), rejected(D, 's3', 'plan', 'synthesis-timed-out')]);
    const M = sid('s3~miss_param');
    await record(M, [
      stage(M, 'plan', 'gen', H.plan),
      stage(M, 'execute', 'gen', H.params),
      stage(M, 'execute', null, null),
      stage(M, 'rewrite', 'gen', H.rewrite),
      rejected(M, 's3~miss_param', 'rewrite', 'synthesis-timed-out'),
    ]);
    // E: a repair without a parameters call at that stage, and two judge prompt versions.
    const E = sid('s4');
    await record(E, [
      stage(E, 'plan', 'gen', H.plan),
      stage(E, 'execute', 'gen', R),
      stage(E, 'execute', null, null),
      stage(E, 'rewrite', 'gen', H.rewrite),
      stage(E, 'critique', 'judge', H.judge),
      stage(E, 'critique', 'judge', H.judge2),
      validated(E, 's4', 's4~s1'),
    ]);
    const injected = ['s1~s1', 's4~s1'].map((taskId, i) =>
      workerEvent(
        'TaskInjected',
        randomUUID(),
        {
          ...at,
          taskId,
          candidateId: taskId,
          category: 'base',
          task: '{}',
          taskHash: randomUUID(),
          parents: [taskId.split('~')[0]!],
          poolVersion: i + 2,
          step: 2,
        },
        { rootSeed: taskId.split('~')[0]!, depth: 1 },
      ),
    );
    await recordEvents(pool, streams.campaign(C), injected);

    const reference = sorted(await referenceRows(pool, C, R));
    expect(sorted(await synthesisFunnelRows(pool, C, R))).toEqual(reference);
    // The rows that tell the exact semantics: E's lone repair is no model call at execute; E's two
    // judge versions are one judged run; M counts for itself, not for D.
    expect(reference).toEqual(
      expect.arrayContaining([
        'StageCompleted execute model 3',
        'StageCompleted execute repair 2',
        'StageCompleted critique model 2',
        'StageCompleted plan model 5',
      ]),
    );
    const funnel = {
      selected: 5,
      planned: 5,
      executed: 3,
      repaired: 2,
      rewritten: 3,
      judged: 2,
      augmented: 1,
      validated: 3,
      rejected: 4,
      rejectedByReason: { 'gate-failed': 1, 'execute.repairs-exhausted': 1, 'synthesis-timed-out': 2 },
      injected: 2,
    };
    expect(await synthesisFunnel(pool, C)).toEqual(funnel);

    // Batches already stored (a retried activity) append nothing and count nothing.
    expect((await recordEvents(pool, streams.campaign(C), selected)).appended).toBe(false);
    expect((await recordEvents(pool, streams.campaign(C), injected)).appended).toBe(false);
    const again = stage(A, 'critique', 'judge', H.judge2);
    await recordEvents(pool, streams.synthesis(A), [again]);
    expect((await recordEvents(pool, streams.synthesis(A), [again])).appended).toBe(false);
    expect(sorted(await synthesisFunnelRows(pool, C, R))).toEqual(sorted(await referenceRows(pool, C, R)));
    expect(await synthesisFunnel(pool, C)).toEqual(funnel);
    // Every model stage's tokens (100 + 20 each, re-sent batches not counted twice), none for the others.
    const tokens = await synthesisTokens(pool, C);
    const modelStages = (
      await pool.query<{ n: number }>(
        `select count(*)::int as n from events where type = 'StageCompleted' and payload->>'campaignId' = $1 and payload->>'model' is not null`,
        [C],
      )
    ).rows[0]!.n;
    expect(tokens.reduce((a, t) => a + t.stages, 0)).toBe(modelStages);
    expect(tokens.reduce((a, t) => a + t.promptTokens, 0)).toBe(100 * modelStages);
    expect(tokens.reduce((a, t) => a + t.completionTokens, 0)).toBe(20 * modelStages);
    // A repair is a model call of the execute stage: its tokens count there.
    expect(tokens.map((t) => t.stage)).toContain('execute');

    // The migration's backfill over the campaign's events (a view in a scratch schema, rolled
    // back) gives the rows the projection kept.
    await withScratchSchema(owner, { events: `payload->>'campaignId' = '${C}'` }, async (c, schema) => {
      await c.query(migrationUp('0017_synthesis_funnel.sql'));
      await c.query(migrationUp('0027_synthesis_tokens.sql'));
      for (const [table, cols] of [
        ['synthesis_funnel_marks', 'run_id, stage, no_model, hashes'],
        ['synthesis_funnel_counts', 'type, stage, key, hashes, n::int'],
        ['synthesis_tokens', 'stage, stages::int, prompt_tokens::int, completion_tokens::int'],
      ] as const) {
        const rows = (s: string) =>
          c
            .query(`select ${cols} from ${s}.${table} where campaign_id = $1 order by ${cols}`, [C])
            .then((r) => r.rows);
        const live = await rows('public');
        expect(live.length).toBeGreaterThan(5);
        expect(await rows(schema), table).toEqual(live);
      }
      expect(sorted(await synthesisFunnelRows(c, C, R))).toEqual(sorted(await referenceRows(pool, C, R)));
    });

    // Latencies: every run's first outcome as before, and a bound keeps the newest runs by start.
    const all = await referenceLatencies(pool, C);
    expect(all).toHaveLength(5);
    expect(await synthesisLatencyRows(pool, C)).toEqual(all);
    const newest = await synthesisLatencyRows(pool, C, 2);
    expect(newest.map((r) => r.synthesis_id).sort()).toEqual([E, M].sort());
    expect(newest).toEqual(all.filter((r) => r.synthesis_id === E || r.synthesis_id === M));
    expect(newest[0]).toMatchObject({ seed: expect.any(String), step: '1' });
  });

  it('adds a failed stage’s tokens to the cost ledger once, beside the completions, as the backfill does', async () => {
    const C = `tokens-${randomUUID().slice(0, 8)}`;
    const S = `${C}:1:s1`;
    const at = { campaignId: C, synthesisId: S, occurredAt: Date.now() };
    const started = workerEvent('SynthesisStarted', eventIds.synthesisStarted(S), {
      ...at,
      seedTaskId: 's1',
      selectionEventId: randomUUID(),
      generatorModel: 'gen',
    });
    const completed = workerEvent('StageCompleted', eventIds.stageCompleted(S, 'plan', 1), {
      ...at,
      stage: 'plan',
      attempt: 1,
      model: 'gen',
      promptVersionHash: H.plan,
      outputHash: 'o'.repeat(64),
      promptTokens: 100,
      completionTokens: 20,
    });
    const failed = (
      prompt: string,
      stage: 'plan' | 'rewrite' | 'critique',
      attempt: number,
      tokens: [number, number] | null,
    ) =>
      workerEvent('StageFailed', eventIds.stageFailed(S, prompt, attempt), {
        ...at,
        stage,
        attempt,
        model: 'gen',
        promptVersionHash: H.plan,
        reason: `generator output for stage ${prompt} (gen) failed validation 3 time(s): the answer was cut off at max_completion_tokens (4096)`,
        promptTokens: tokens?.[0] ?? null,
        completionTokens: tokens?.[1] ?? null,
      });
    const events = [
      started,
      completed,
      // a re-plan whose every answer was refused: the plan row, beside the completion
      failed('plan', 'plan', 2, [400, 80]),
      // a stage that only failed: a row of its own
      failed('rewrite', 'rewrite', 1, [3000, 12288]),
      // a server that reported no usage: nothing to add
      failed('judge', 'critique', 1, null),
    ];
    for (const e of events) await recordEvents(pool, streams.synthesis(S), [e]);
    // Recorded again (an activity retried after its record committed, or a crash between the record
    // and the failure): appended once, counted once.
    for (const e of events)
      expect((await recordEvents(pool, streams.synthesis(S), [e])).appended).toBe(false);
    const ledger = [
      { stage: 'plan', stages: 1, failed: 1, promptTokens: 500, completionTokens: 100 },
      { stage: 'rewrite', stages: 0, failed: 1, promptTokens: 3000, completionTokens: 12288 },
    ];
    expect(await synthesisTokens(pool, C)).toEqual(ledger);
    // A failed stage is no completion: the funnel counts the plan's completion only.
    expect(await synthesisFunnel(pool, C)).toMatchObject({ planned: 1, rewritten: 0, judged: 0 });
    // Every cost per outcome reads the ledger, so the failed runs' tokens are in each of them.
    await insertPlan(pool, C, 1, {}, { useful: 2 });
    const total = 500 + 100 + 3000 + 12288;
    expect(await generatorCost(pool, C, { selected: 1, validated: 1, injected: 1 })).toMatchObject({
      tokens: { prompt: 3500, completion: 12388, total },
      perSelected: total,
      useful: 2,
      perUseful: total / 2,
    });

    // The migrations' backfill over the campaign's events gives the rows the projection kept.
    await withScratchSchema(owner, { events: `payload->>'campaignId' = '${C}'` }, async (c, schema) => {
      await c.query(migrationUp('0027_synthesis_tokens.sql'));
      await c.query(migrationUp('0030_synthesis_tokens_failed.sql'));
      const cols = 'stage, stages::int, failed::int, prompt_tokens::int, completion_tokens::int';
      const rows = (s: string) =>
        c
          .query(`select ${cols} from ${s}.synthesis_tokens where campaign_id = $1 order by stage`, [C])
          .then((r) => r.rows);
      expect(await rows(schema)).toEqual(await rows('public'));
      expect(await rows(schema)).toHaveLength(2);
    });
  });
});
