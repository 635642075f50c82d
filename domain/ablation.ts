// The ablation switches by the names a command line uses (`--ablation rewrite-off,judge-off`),
// each a part of the campaign config's `ablation` (domain/campaign-config.ts).
import type { CampaignConfig } from './campaign-config.js';

type Ablation = Partial<CampaignConfig['ablation']>;

export const ABLATION_SWITCHES: Readonly<Record<string, { ablation: Ablation; what: string }>> = {
  'rewrite-off': { ablation: { rewrite: false }, what: 'each turn written alone, no coherence rewrite' },
  'judge-off': { ablation: { judge: false }, what: 'no LLM quality judge (gates and re-execution only)' },
  'random-selection': { ablation: { selection: 'random' }, what: 'seeds drawn at random, not by φ' },
  'no-retirement': { ablation: { retirement: false }, what: 'nothing retired by rule' },
  'static-pool': {
    ablation: { pool: 'static' },
    what: 'seeds selected and their candidates injected once, from the initial boundary; the pool frozen after',
  },
  'no-injection': {
    ablation: { injection: false },
    what: 'candidates synthesized, nothing injected or pruned',
  },
};

/** `rewrite-off,judge-off` -> `{rewrite: false, judge: false}`; an unknown name throws, naming the known ones. */
export function parseAblationSwitches(list: string): Ablation {
  const out: Ablation = {};
  for (const raw of list.split(',')) {
    const name = raw.trim();
    if (name === '') continue;
    const s = ABLATION_SWITCHES[name];
    if (!s)
      throw new Error(
        `unknown ablation switch ${JSON.stringify(name)}; known: ${Object.keys(ABLATION_SWITCHES).join(', ')}`,
      );
    Object.assign(out, s.ablation);
  }
  return out;
}
