// A validated candidate that is a near-copy of a campaign seed or of an earlier candidate is
// rejected at recordOutcome, naming the nearest task and the similarity; a distinct one passes.
import { randomUUID } from 'node:crypto';
import { afterAll, describe, expect, it } from 'vitest';
import { candidateHash } from '../domain/candidate.js';
import { eventIds, streams } from '../domain/ids.js';
import { taskFeatures } from '../domain/near-duplicate.js';
import { registerCampaign } from '../platform/store/campaigns.js';
import { createPool, inTransaction } from '../platform/store/db.js';
import { recordEventsIn } from '../platform/store/pool/projection.js';
import { workerEvent } from './events.js';
import type { ExecutorClient } from './executor-client.js';
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
async function campaignWithSeed(campaignId: string, config?: Record<string, unknown>) {
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
    executor: {} as ExecutorClient,
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
