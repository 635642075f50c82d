// The gates of recordOutcome: a validated candidate that is a near-copy of a campaign seed or of an
// earlier candidate is rejected, naming the nearest task and the similarity; one that copies an
// evaluation task (the real executor's BFCL tasks past the seeds) is rejected as eval-contamination;
// a distinct one passes.
import { execFile } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { promisify } from 'node:util';
import { afterAll, describe, expect, it } from 'vitest';
import { candidateHash } from '../domain/candidate.js';
import { eventIds, streams } from '../domain/ids.js';
import { taskFeatures } from '../domain/near-duplicate.js';
import { registerCampaign } from '../platform/store/campaigns.js';
import { createPool, inTransaction } from '../platform/store/db.js';
import { recordEventsIn } from '../platform/store/pool/projection.js';
import { ROOT } from '../test/support/sources.js';
import { workerEvent } from './events.js';
import { ExecutorClient } from './executor-client.js';
import { FeatureCache, knownTasks } from './known-tasks.js';
import { loadGeneratorEndpoints } from './llm/endpoints.js';
import type { Candidate } from './llm/schemas.js';
import { createSynthesisActivities } from './synthesis.js';

const pool = createPool({ application: 'rods-near-duplicate-test', max: 4 });
afterAll(() => pool.end());

const task = (id: string, turns: string[], calls: string[][]): Candidate =>
  ({
    id,
    category: 'base',
    involved_classes: ['GorillaFileSystem'],
    initial_config: {},
    question: turns.map((content) => [{ role: 'user', content }]),
    ground_truth: calls,
  }) as Candidate;

const SEED = task(
  'multi_turn_base_7',
  [
    'Go into the document folder and create a file called notes.txt for all the fresh ideas we have',
    'Write the sentence collaboration leads to success into that file and show me its contents',
  ],
  [["cd(folder='document')", "touch(file_name='notes.txt')"], ["echo(content='x', file_name='notes.txt')"]],
);

/** A campaign with SEED as its one seed; returns recordOutcome of a validated candidate. */
async function campaignWithSeed(
  campaignId: string,
  config?: Record<string, unknown>,
  executor = new ExecutorClient(),
) {
  await registerCampaign(pool, { campaignId, ...(config ? { config } : {}) });
  await inTransaction(pool, (c) =>
    recordEventsIn(c, streams.campaign(campaignId), [
      workerEvent('TaskSeeded', eventIds.taskSeeded(campaignId, SEED.id), {
        campaignId,
        taskId: SEED.id,
        category: 'base',
        task: JSON.stringify(SEED),
        taskHash: candidateHash(SEED),
        source: 'test',
        poolVersion: 1,
        occurredAt: Date.now(),
      }),
    ]),
  );
  const acts = createSynthesisActivities({
    pool,
    executor,
    endpoints: loadGeneratorEndpoints({}),
  });
  return (candidate: Candidate) =>
    acts.recordOutcome({
      kind: 'validated',
      campaignId,
      synthesisId: `${campaignId}-${candidate.id}`,
      seedTaskId: SEED.id,
      candidate,
      judge: { model: 'judge', scores: {}, reasons: [] },
      refined: false,
      lineage: {},
    });
}

describe('near-duplicate candidates', () => {
  it('rejects a near-copy of a seed and of an earlier candidate, and validates a distinct task', async () => {
    const campaignId = `neardup-${randomUUID().slice(0, 8)}`;
    const outcome = await campaignWithSeed(campaignId, { synthesis: { nearDuplicateThreshold: 0.8 } });
    const rejection = async (candidate: Candidate) => {
      const { rows } = await pool.query<{ payload: { reasonCode: string; reason: string } }>(
        `select payload from events where stream_id = $1 and type = 'CandidateRejected'`,
        [streams.synthesis(`${campaignId}-${candidate.id}`)],
      );
      return rows[0]?.payload;
    };

    // The seed with one word changed in its first turn: same calls, nearly the same question.
    const copyOfSeed = task(
      'c-copy',
      [SEED.question[0]![0]!.content.replace('notes.txt', 'ideas.txt'), SEED.question[1]![0]!.content],
      SEED.ground_truth,
    );
    expect(await outcome(copyOfSeed)).toEqual({ outcome: 'rejected', reasonCode: 'near-duplicate' });
    expect((await rejection(copyOfSeed))?.reason).toMatch(
      /^near duplicate of seed multi_turn_base_7: similarity 0\.\d{3} \(question 0\.\d{3}, calls 1\.000\) >= 0\.8$/,
    );

    const distinct = task(
      'c-distinct',
      [
        'List every file in the workspace, then sort them by name and tell me which one is largest',
        'Find the line mentioning budget in report.md and count its words for me please',
      ],
      [
        ['ls()', "sort(file_name='files.txt')"],
        ["grep(file_name='report.md', pattern='budget')", "wc(file_name='report.md', mode='w')"],
      ],
    );
    expect(await outcome(distinct)).toEqual({ outcome: 'validated', candidateId: 'c-distinct' });

    // A near-copy of that validated candidate (not of the seed) names the candidate.
    const copyOfDistinct = task(
      'c-copy-2',
      [distinct.question[0]![0]!.content.replace('largest', 'biggest'), distinct.question[1]![0]!.content],
      distinct.ground_truth,
    );
    expect(await outcome(copyOfDistinct)).toEqual({ outcome: 'rejected', reasonCode: 'near-duplicate' });
    expect((await rejection(copyOfDistinct))?.reason).toContain('near duplicate of candidate c-distinct');
  });

  it("computes a task's features once per process, reads only contents it has not seen, and skips rejected candidates", async () => {
    const campaignId = `neardup-cache-${randomUUID().slice(0, 8)}`;
    const validate = await campaignWithSeed(campaignId);
    const other = task(
      'c-other',
      ['Show me the first ten lines of the log file and then tell me how many errors it reports'],
      [["head(file_name='app.log', lines=10)"]],
    );
    expect(await validate(other)).toEqual({ outcome: 'validated', candidateId: 'c-other' });
    const copy = task(
      'c-copy',
      [SEED.question[0]![0]!.content, SEED.question[1]![0]!.content],
      SEED.ground_truth,
    );
    expect(await validate(copy)).toEqual({ outcome: 'rejected', reasonCode: 'near-duplicate' });

    const cache = new FeatureCache();
    const read = () => inTransaction(pool, (c) => knownTasks(c, campaignId, 'c-new', undefined, cache));
    const first = await read();
    // The seed and the validated candidate, not the rejected copy: seeds first, then candidates by id.
    expect(first.map((t) => `${t.kind}:${t.id}`)).toEqual([`seed:${SEED.id}`, 'candidate:c-other']);
    expect(first[0]!.features).toEqual(taskFeatures(SEED));
    expect(first[1]!.features).toEqual(taskFeatures(other));
    expect({ hits: cache.hits, misses: cache.misses, size: cache.size }).toEqual({
      hits: 0,
      misses: 2,
      size: 2,
    });

    const again = await read();
    expect(again).toEqual(first);
    expect({ hits: cache.hits, misses: cache.misses }).toEqual({ hits: 2, misses: 2 });

    // A later candidate is the one content read.
    const later = task(
      'c-later',
      ['Create a folder named archive and move every text file of this folder into it'],
      [["mkdir(dir_name='archive')"]],
    );
    expect(await validate(later)).toEqual({ outcome: 'validated', candidateId: 'c-later' });
    const third = await read();
    expect(third.map((t) => t.id)).toEqual([SEED.id, 'c-later', 'c-other']);
    expect({ hits: cache.hits, misses: cache.misses, size: cache.size }).toEqual({
      hits: 4,
      misses: 3,
      size: 3,
    });
  });

  it('records a candidate under the category its structure gives it, not the label it was drafted with', async () => {
    const campaignId = `labels-${randomUUID().slice(0, 8)}`;
    const validate = await campaignWithSeed(campaignId);
    // A child of a miss_func seed as plan -> execute -> rewrite make it: no withheld function.
    const child = {
      ...task(
        'c-label',
        ['Archive every report of the quarter into a new folder named q3', 'Then list what the folder holds'],
        [["mkdir(dir_name='q3')"], ["cd(folder='q3')", 'ls()']],
      ),
      category: 'miss_func',
    } as Candidate;
    expect(await validate(child)).toEqual({ outcome: 'validated', candidateId: 'c-label' });
    const { rows } = await pool.query<{
      payload: { category: string; candidate: string };
      metadata: { lineage: { category: string } };
    }>(`select payload, metadata from events where stream_id = $1 and type = 'CandidateValidated'`, [
      streams.synthesis(`${campaignId}-c-label`),
    ]);
    expect(rows[0]!.payload.category).toBe('base');
    expect(JSON.parse(rows[0]!.payload.candidate).category).toBe('base');
    expect(rows[0]!.metadata.lineage.category).toBe('base');
  });
});

describe('evaluation-set contamination', () => {
  const rejectionReason = async (campaignId: string, candidateId: string) => {
    const { rows } = await pool.query<{ payload: { reason: string } }>(
      `select payload from events where stream_id = $1 and type = 'CandidateRejected'`,
      [streams.synthesis(`${campaignId}-${candidateId}`)],
    );
    return rows[0]?.payload.reason;
  };
  // An evaluation task of a campaign with 100 seeds per category: base index 150.
  const evalTask = async () => {
    const [t] = await new ExecutorClient().seeds('base', 1, 150);
    expect(t!.id).toBe('multi_turn_base_150');
    return t!;
  };
  const asCandidate = (t: Awaited<ReturnType<typeof evalTask>>, id: string, turns?: string[]) =>
    ({
      ...t,
      id,
      ...(turns ? { question: turns.map((content) => [{ role: 'user', content }]) } : {}),
    }) as Candidate;
  // Its two user turns said in other words; the calls and the initial state unchanged.
  const PARAPHRASE = [
    'I am planning a trip between Rivermist and Stonebrook. What would one economy ticket cost on 6 October 2026?',
    "Convert 15400 pounds and use the result as my daily budget limit; my token is 'abc123token'.",
  ];

  it('rejects a planted copy and a paraphrase of an evaluation task, naming it and the scores; passes a clean task', async () => {
    const campaignId = `contam-${randomUUID().slice(0, 8)}`;
    const outcome = await campaignWithSeed(campaignId);
    const e = await evalTask();

    expect(await outcome(asCandidate(e, 'c-planted'))).toEqual({
      outcome: 'rejected',
      reasonCode: 'eval-contamination',
    });
    expect(await rejectionReason(campaignId, 'c-planted')).toBe(
      'copies evaluation task multi_turn_base_150 (user-turn 5-gram overlap 1.000, same ground-truth calls: yes, ' +
        'same initial state: yes): 5-gram overlap >= 0.5; same calls from the same state',
    );

    expect(await outcome(asCandidate(e, 'c-paraphrase', PARAPHRASE))).toEqual({
      outcome: 'rejected',
      reasonCode: 'eval-contamination',
    });
    expect(await rejectionReason(campaignId, 'c-paraphrase')).toMatch(
      /^copies evaluation task multi_turn_base_150 \(user-turn 5-gram overlap 0\.0\d\d, same ground-truth calls: yes, same initial state: yes\): same calls from the same state$/,
    );

    // The same environment and state, its own question and calls.
    const clean = {
      ...asCandidate(e, 'c-clean', [
        'What does a business class seat from Rivermist to Stonebrook cost on 2 November 2026?',
        "Book it with my Visa card 1234-5678-9012-3456; my token is 'abc123token'.",
      ]),
      ground_truth: [
        [
          "get_flight_cost(travel_from='RMS', travel_to='SBK', travel_date='2026-11-02', travel_class='business')",
        ],
        [
          "book_flight(access_token='abc123token', card_id='1234-5678-9012-3456', travel_date='2026-11-02', travel_from='RMS', travel_to='SBK', travel_class='business')",
        ],
      ],
    } as Candidate;
    expect(await outcome(clean)).toEqual({ outcome: 'validated', candidateId: 'c-clean' });
  });

  it('follows the campaign rule: off, or without the calls-and-state signal', async () => {
    const e = await evalTask();
    const off = `contam-off-${randomUUID().slice(0, 8)}`;
    const outcomeOff = await campaignWithSeed(off, { synthesis: { contamination: { enabled: false } } });
    expect(await outcomeOff(asCandidate(e, 'c-planted'))).toEqual({
      outcome: 'validated',
      candidateId: 'c-planted',
    });

    const textOnly = `contam-text-${randomUUID().slice(0, 8)}`;
    const outcomeText = await campaignWithSeed(textOnly, {
      synthesis: { contamination: { sameCallsAndState: false } },
    });
    expect(await outcomeText(asCandidate(e, 'c-paraphrase', PARAPHRASE))).toEqual({
      outcome: 'validated',
      candidateId: 'c-paraphrase',
    });
    expect(await outcomeText(asCandidate(e, 'c-planted'))).toEqual({
      outcome: 'rejected',
      reasonCode: 'eval-contamination',
    });

    // With 200 seeds per category there is no evaluation task left: nothing to copy.
    const allSeeds = `contam-all-${randomUUID().slice(0, 8)}`;
    const outcomeAll = await campaignWithSeed(allSeeds, { seeds: { perCategory: 200 } });
    expect(await outcomeAll(asCandidate(e, 'c-planted'))).toEqual({
      outcome: 'validated',
      candidateId: 'c-planted',
    });
  });

  it("`rods contamination` reports the pool's nearest evaluation tasks and the gate's rejections", async () => {
    const campaignId = `contam-cli-${randomUUID().slice(0, 8)}`;
    const outcome = await campaignWithSeed(campaignId);
    const e = await evalTask();
    expect(await outcome(asCandidate(e, 'c-planted'))).toMatchObject({ reasonCode: 'eval-contamination' });
    // A pool member that is an evaluation task (a seed list taken from the wrong split).
    await inTransaction(pool, (c) =>
      recordEventsIn(c, streams.campaign(campaignId), [
        workerEvent('TaskSeeded', eventIds.taskSeeded(campaignId, 'planted-seed'), {
          campaignId,
          taskId: 'planted-seed',
          category: 'base',
          task: JSON.stringify({ ...e, id: 'planted-seed' }),
          taskHash: candidateHash({ ...e, id: 'planted-seed' }),
          source: 'test',
          poolVersion: 2,
          occurredAt: Date.now(),
        }),
      ]),
    );
    const { stdout } = await promisify(execFile)(
      process.execPath,
      ['bin/rods.mjs', 'contamination', '--campaign', campaignId, '--seeds', '--json'],
      { cwd: ROOT },
    );
    const r = JSON.parse(stdout);
    expect(r).toMatchObject({
      campaignId,
      evaluationTasks: 400,
      compared: 2,
      contaminated: 1,
      maxTextOverlap: 1,
      rejectedAsContamination: 1,
    });
    expect(r.nearest[0]).toEqual({
      taskId: 'planted-seed',
      origin: 'seed',
      category: 'base',
      evalTaskId: 'multi_turn_base_150',
      textOverlap: 1,
      sameCalls: true,
      sameState: true,
      contaminated: true,
    });
    expect(r.nearest[1]).toMatchObject({ taskId: SEED.id, contaminated: false });
    // Without --seeds only generated tasks count: none here.
    const { stdout: text } = await promisify(execFile)(
      process.execPath,
      ['bin/rods.mjs', 'contamination', '--campaign', campaignId],
      { cwd: ROOT },
    );
    expect(text).toContain('0 generated active tasks against 400 evaluation tasks');
    expect(text).toContain('rejected by the gate so far: 1');
  });

  it('says the executor is unreachable (a retryable failure) and records nothing while it is', async () => {
    const campaignId = `contam-down-${randomUUID().slice(0, 8)}`;
    const outcome = await campaignWithSeed(
      campaignId,
      undefined,
      new ExecutorClient({ url: 'http://127.0.0.1:9' }),
    );
    const e = await evalTask();
    await expect(outcome(asCandidate(e, 'c-planted'))).rejects.toMatchObject({
      type: 'ExecutorUnavailable',
      nonRetryable: false,
      message: expect.stringContaining('http://127.0.0.1:9 is not reachable'),
    });
    const { rows } = await pool.query(`select 1 from events where stream_id = $1`, [
      streams.synthesis(`${campaignId}-c-planted`),
    ]);
    expect(rows).toHaveLength(0);
  });
});
