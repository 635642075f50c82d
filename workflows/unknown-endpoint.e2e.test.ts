// A campaign naming a generator endpoint the worker does not have: each synthesis fails at its
// first stage, once (not retried), and is rejected naming the endpoint and the worker's ones.
import { describe, expect, it } from 'vitest';
import { standinCampaigns } from '../test/support/standin-campaign.js';
import { waitUntil } from '../test/support/wait.js';

const campaigns = standinCampaigns(['--quiet']);

describe('a campaign naming an endpoint the worker lacks', () => {
  it('rejects each synthesis at its first stage without retrying, naming the endpoint', async () => {
    const loop = await campaigns.start(
      {
        seeds: { perCategory: 3 },
        selection: {
          budgetPerStep: 2,
          perCategoryQuota: { base: 1, miss_func: 1, miss_param: 0, long_context: 0 },
          cooldownSteps: 0,
          maxConcurrentSyntheses: 2,
        },
      },
      { generator: { endpoint: 'not-configured' } },
    );
    let step = 0;
    const rejected = await waitUntil(
      async () => {
        step++;
        await loop.trainStep(step);
        await loop.waitPlanned(step);
        const { rows } = await loop.pool.query<{
          synthesis_id: string;
          stage: string;
          code: string;
          reason: string;
        }>(
          `select payload->>'synthesisId' as synthesis_id, payload->>'stage' as stage,
                  payload->>'reasonCode' as code, payload->>'reason' as reason
             from events where type = 'CandidateRejected' and payload->>'campaignId' = $1`,
          [loop.campaignId],
        );
        return rows.length > 0 ? rows : undefined;
      },
      { what: () => `a rejection in ${loop.campaignId} (step ${step})`, timeoutMs: 300_000, intervalMs: 0 },
    );
    const r = rejected[0]!;
    expect(r).toMatchObject({ stage: 'plan', code: 'generator-request-refused' });
    expect(r.reason).toContain('"not-configured", which this worker does not have (its endpoints: default)');
    // The stand-in was never asked, and the plan activity ran once.
    const health = (await (await fetch(campaigns.standin.url.replace(/\/v1$/, '/health'))).json()) as {
      stats: { requests: number };
    };
    expect(health.stats.requests).toBe(0);
    const history = await loop.client.workflow.getHandle(r.synthesis_id).fetchHistory();
    const starts = (history.events ?? []).filter((e) => e.activityTaskStartedEventAttributes);
    const planStarts = starts.filter((e) => {
      const scheduledId = e.activityTaskStartedEventAttributes!.scheduledEventId;
      const scheduled = history.events!.find((x) => String(x.eventId) === String(scheduledId));
      return scheduled?.activityTaskScheduledEventAttributes?.activityType?.name === 'planTask';
    });
    expect(planStarts.map((e) => e.activityTaskStartedEventAttributes!.attempt)).toEqual([1]);
  }, 600_000);
});
