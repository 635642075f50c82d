// Ablation switches on the live pipeline (config.ablation): with the judge off, a candidate that
// passes the gates and re-executes is validated without an LLM verdict; with injection off the
// pool stays static while candidates wait in the queue. The switches are in CampaignStarted.
import { describe, expect, it } from 'vitest';
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
});
