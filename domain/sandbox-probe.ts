import { proxySinks, type Sinks } from '@temporalio/workflow';
import { candidateHash, checkCandidate } from './candidate.js';
import { parseCampaignConfig } from './campaign-config.js';
import { applyDecisions, EMPTY_POOL, planInjection, retire, seedTasks, selectSeeds } from './pool.js';

export interface ProbeSinks extends Sinks {
  probe: { report(result: string): void };
}

export async function domainProbe(): Promise<void> {
  const cfg = parseCampaignConfig({});
  const p = applyDecisions(EMPTY_POOL, seedTasks(EMPTY_POOL, [{ taskId: 'a', category: 'base' }], 0));
  const h = candidateHash({ id: 'x', category: 'base' });
  const g = checkCandidate({}, {}, { maxStringLength: 1, maxListItems: 1, turns: { min: 1, max: 1 }, callsPerTurn: { min: 1, max: 1 } });
  proxySinks<ProbeSinks>().probe.report(JSON.stringify([p.version, h, g, selectSeeds(p, {}, 1, cfg).length, planInjection(p, 10, cfg).boundary, retire(p, {}, 1, cfg).length]));
}
