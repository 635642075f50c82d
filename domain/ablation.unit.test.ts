import { describe, expect, it } from 'vitest';
import { ABLATION_SWITCHES, parseAblationSwitches } from './ablation.js';
import { parseCampaignConfig } from './campaign-config.js';

describe('ablation switches by name', () => {
  it('combines switches into the config ablation, which the config schema accepts', () => {
    const a = parseAblationSwitches('rewrite-off, judge-off,static-pool,no-injection');
    expect(a).toEqual({ rewrite: false, judge: false, pool: 'static', injection: false });
    expect(parseCampaignConfig({ ablation: a }).ablation).toMatchObject({
      rewrite: false,
      judge: false,
      pool: 'static',
      injection: false,
      retirement: true,
      selection: 'boundary',
    });
  });

  it('every switch turns off something the default config has on', () => {
    const defaults = parseCampaignConfig({}).ablation as Record<string, unknown>;
    for (const [name, s] of Object.entries(ABLATION_SWITCHES)) {
      for (const [k, v] of Object.entries(s.ablation)) expect(defaults[k], name).not.toEqual(v);
    }
  });

  it('names the known switches when one is unknown; an empty list is no ablation', () => {
    expect(() => parseAblationSwitches('rewrite-off,no-judge')).toThrow(
      /unknown ablation switch "no-judge"; known: rewrite-off, judge-off/,
    );
    expect(parseAblationSwitches('')).toEqual({});
  });
});
