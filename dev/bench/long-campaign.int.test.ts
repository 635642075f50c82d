// The long-campaign bench at a small size: the history it builds is a campaign's (seeded, rewarded,
// planned, synthesized, injected), the replay it resumes equals live, and every read it times at
// both points has a figure and a ratio.
import { describe, expect, it } from 'vitest';
import { longCampaignOptions, runLongCampaign } from './long-campaign.js';

describe('long-campaign bench', () => {
  it('builds a campaign through the loop writers and times each read at both points', async () => {
    const r = await runLongCampaign(
      longCampaignOptions({ json: true, steps: '40', early: '15', window: '5', repeats: '1', tasks: '40' }),
    );
    expect(r.counts.groups).toBeGreaterThan(40 * 20);
    expect(r.counts.selected).toBeGreaterThan(0);
    expect(r.counts.validated + r.counts.rejected).toBe(r.counts.selected);
    expect(r.counts.injected).toBeGreaterThan(0);
    for (const p of [r.early, r.late]) {
      expect(p.replay_equal).toBe(true);
      // The timed resume read the steps since the checkpoint taken `window` steps before.
      expect(p.replay_resume_events).toBeGreaterThan(0);
      expect(p.lineage_task).not.toBeNull();
      for (const k of ['status_ms', 'dashboard_ms', 'lineage_ms', 'replay_resume_ms', 'planning_ms'] as const)
        expect(p[k]).toBeGreaterThan(0);
    }
    expect(Object.keys(r.late_over_early).sort()).toEqual([
      'dashboard',
      'lineage',
      'planning',
      'replay_resume',
      'status',
    ]);
    expect(r.ratio).toBe(Math.max(...Object.values(r.late_over_early)));
    expect(r.bytes_per_1000_steps.events).toBeGreaterThan(0);
    // The pool sink was written (its files bounded by the newest versions kept) and the relay
    // published to its topic.
    expect(r.late.rss_bytes).toBeGreaterThan(0);
    expect(r.bytes_per_1000_steps.relay_topic).toBeGreaterThan(0);
  }, 600_000);
});
