// Ablation switches on the live pipeline (config.ablation): with the judge off, a candidate that
// passes the gates and re-executes is validated without an LLM verdict; with injection off the
// pool stays static while candidates wait in the queue; with the rewrite off, every turn's user
// message is written on its own from that turn's calls. The switches are in CampaignStarted.
import { describe, expect, it } from 'vitest';
import { promptVersion } from '../platform/config/prompts.js';
import { ONE_SEED_PER_CATEGORY, standinCampaigns } from '../test/support/standin-campaign.js';

const campaigns = standinCampaigns(['--seed', '11']);

describe('ablations', () => {
  it('judge off and injection off: candidates validated without a verdict, nothing injected, all recorded', async () => {
    const loop = await campaigns.start({
      seeds: { perCategory: 4 },
      selection: ONE_SEED_PER_CATEGORY,
      pool: { injectionCadence: 'steps:2' },
      ablation: { judge: false, injection: false },
    });
    await campaigns.runSteps(loop, 4);
    const q = async <T>(sql: string) => (await loop.pool.query<T & object>(sql, [loop.campaignId])).rows;
    const started = await q<{ config: string }>(
      `select payload->>'config' as config from events where type = 'CampaignStarted' and payload->>'campaignId' = $1`,
    );
    expect(JSON.parse(started[0]!.config)).toMatchObject({ ablation: { judge: false, injection: false } });

    const validated = await q<{ judge_model: string }>(
      `select payload->>'judgeModel' as judge_model from events where type = 'CandidateValidated' and payload->>'campaignId' = $1`,
    );
    expect(validated.length).toBeGreaterThan(0);
    expect(new Set(validated.map((v) => v.judge_model))).toEqual(new Set(['none']));
    // The judge's StageCompleted is the critique stage with a model; the gates' has none.
    const stages = await q<{ stage: string; model: string | null }>(
      `select distinct payload->>'stage' as stage, payload->>'model' as model from events
        where type = 'StageCompleted' and payload->>'campaignId' = $1`,
    );
    expect(stages).toContainEqual({ stage: 'critique', model: null });
    expect(stages).toContainEqual({ stage: 'rewrite', model: expect.any(String) });
    expect(stages.filter((s) => s.stage === 'critique' && s.model !== null)).toEqual([]);

    expect(
      await q(`select 1 from events where type = 'TaskInjected' and payload->>'campaignId' = $1`),
    ).toEqual([]);
    const generated = await q(`select 1 from pool_members where campaign_id = $1 and origin = 'generated'`);
    expect(generated).toEqual([]);
  });

  it('rewrite off: one turn-query per turn, each turn written alone, no coherence rewrite', async () => {
    const loop = await campaigns.start({
      seeds: { perCategory: 4 },
      selection: ONE_SEED_PER_CATEGORY,
      ablation: { rewrite: false },
    });
    await campaigns.runSteps(loop, 3);
    const q = async <T>(sql: string) => (await loop.pool.query<T & object>(sql, [loop.campaignId])).rows;
    const rewrites = await q<{ synthesis_id: string; attempt: number; prompt: string }>(
      `select payload->>'synthesisId' as synthesis_id, (payload->>'attempt')::int as attempt,
              payload->>'promptVersionHash' as prompt
         from events where type = 'StageCompleted' and payload->>'stage' = 'rewrite'
          and payload->>'campaignId' = $1`,
    );
    expect(rewrites.length).toBeGreaterThan(0);
    expect(new Set(rewrites.map((r) => r.prompt))).toEqual(new Set([promptVersion('turn-query')]));
    const validated = await q<{ synthesis_id: string; candidate: string }>(
      `select payload->>'synthesisId' as synthesis_id, payload->>'candidate' as candidate
         from events where type = 'CandidateValidated' and payload->>'campaignId' = $1
          and payload->>'synthesisId' not like '%~%'`,
    );
    expect(validated.length).toBeGreaterThan(0);
    for (const v of validated) {
      const task = JSON.parse(v.candidate) as { question: { content: string }[][]; ground_truth: string[][] };
      // one turn-query per turn of the validated candidate, attempts 0..turns-1
      const attempts = rewrites
        .filter((r) => r.synthesis_id === v.synthesis_id)
        .map((r) => r.attempt)
        .sort((a, b) => a - b);
      expect(attempts).toEqual(task.ground_truth.map((_, t) => t));
      expect(task.question.every((turn) => turn.length === 1 && turn[0]!.content.length > 0)).toBe(true);
    }
  });
});
