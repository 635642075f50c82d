// The judge in a live campaign: its prompt carries the candidate's execution (each turn's state),
// and a verdict that contradicts its own scores is overridden by the rule, the disagreement kept
// in the candidate's lineage.
import { describe, expect, it } from 'vitest';
import { ONE_SEED_PER_CATEGORY, standinCampaigns } from '../test/support/standin-campaign.js';

// Every judge answer flips its verdict against its scores.
const campaigns = standinCampaigns(['--seed', '5', '--contradict-rate', '1']);

describe('the judge', () => {
  it('sees the execution states, and the rule overrides a verdict that contradicts the scores', async () => {
    const loop = await campaigns.start({ seeds: { perCategory: 4 }, selection: ONE_SEED_PER_CATEGORY });
    await campaigns.runSteps(loop, 3);
    const health = (await (await fetch(campaigns.standin.url.replace(/\/v1$/, '/health'))).json()) as {
      stats: { byStage: Record<string, number>; judgeWithStates: number; contradicted: number };
    };
    expect(health.stats.byStage.judge).toBeGreaterThan(0);
    expect(health.stats.judgeWithStates).toBe(health.stats.byStage.judge);
    expect(health.stats.contradicted).toBe(health.stats.byStage.judge);

    // The stand-in's scores accept most candidates; its flipped verdicts said reject.
    const { rows } = await loop.pool.query<{ lineage: Record<string, unknown> }>(
      `select lineage from candidates where campaign_id = $1 and status in ('validated', 'injected')`,
      [loop.campaignId],
    );
    expect(rows.length).toBeGreaterThan(0);
    for (const r of rows) {
      expect(r.lineage.judgeVerdict).toBe('accept');
      expect(r.lineage.judgeDisagreements).toEqual([{ round: 0, judge: 'reject', rule: 'accept' }]);
      expect(r.lineage.judgeReasons).toEqual(
        expect.arrayContaining([expect.stringMatching(/^the judge said reject, but its scores give accept/)]),
      );
    }
  });
});
