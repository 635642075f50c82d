import { describe, expect, it } from 'vitest';
import { CampaignConfigError } from '../../domain/campaign-config.js';
import { campaignConfigOf, DEFAULT_CONFIG } from './campaign-config.js';

describe('campaignConfigOf', () => {
  it('parses each distinct config once: equal configs, in any key order, get the same parsed object', () => {
    const a = campaignConfigOf({ detector: { low: 0.3, high: 0.8 }, rolloutsPerTask: 8 });
    const b = campaignConfigOf({ rolloutsPerTask: 8, detector: { high: 0.8, low: 0.3 } });
    expect(b).toBe(a);
    expect(a.detector.low).toBe(0.3);
    expect(campaignConfigOf({ detector: { low: 0.25, high: 0.8 } })).not.toBe(a);
    // shared, so frozen all the way down
    expect(() => {
      (a.detector as { low: number }).low = 0.5;
    }).toThrow(TypeError);
  });

  it('gives the defaults for an empty or absent config, and refuses an invalid one every time', () => {
    expect(campaignConfigOf(undefined)).toBe(DEFAULT_CONFIG);
    expect(campaignConfigOf({})).toBe(DEFAULT_CONFIG);
    for (let i = 0; i < 2; i++)
      expect(() => campaignConfigOf({ detector: { low: 0.9, high: 0.1 } })).toThrow(CampaignConfigError);
  });

  it('keeps the most recently used configs when many campaigns pass through one worker', () => {
    const first = campaignConfigOf({ rolloutsPerTask: 3 });
    for (let n = 0; n < 100; n++) {
      campaignConfigOf({ rolloutsPerTask: 4, seeds: { perCategory: n + 1 } });
      if (n % 10 === 0) expect(campaignConfigOf({ rolloutsPerTask: 3 })).toBe(first);
    }
    expect(campaignConfigOf({ rolloutsPerTask: 3 })).toBe(first);
  });
});
