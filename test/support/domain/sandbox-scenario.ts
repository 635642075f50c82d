// A curriculum scenario over the whole pure core, run both in Node and inside Temporal's workflow
// sandbox by domain/sandbox.unit.test.ts: the two results must be identical, which shows the core
// imports nothing the sandbox lacks and computes the same decisions in either place.

import { parseCampaignConfig } from '../../../domain/campaign-config.js';
import { type CandidateTask, candidateHash, checkCandidate, gateLimits } from '../../../domain/candidate.js';
import type { PoolDecision, SelectDecision } from '../../../domain/pool/decisions.js';
import { applyDecisions } from '../../../domain/pool/evolve.js';
import { seedTasks } from '../../../domain/pool/policy.js';
import { EMPTY_POOL } from '../../../domain/pool/state.js';
import { planStep } from '../../../domain/step-plan.js';
import { statsOf } from './task-stats.js';

// count stays one group's 16 rollouts while groupCount follows the step (as the scenario always had it).
const stats = (m: number, step: number) => statsOf(m, { lastStep: step }, { groupCount: step });

export function runScenario(): unknown {
  const cfg = parseCampaignConfig({
    pool: { generatedCap: 3, epochSteps: 2, injectionShare: 0.5 },
    selection: { cooldownSteps: 1 },
  });
  const categories = ['base', 'miss_func', 'miss_param', 'long_context'];
  let pool = EMPTY_POOL;
  const log: PoolDecision[] = [];
  const fold = (ds: PoolDecision[]) => {
    log.push(...ds);
    pool = applyDecisions(pool, ds);
  };
  fold(
    seedTasks(
      pool,
      Array.from({ length: 8 }, (_, i) => ({ taskId: `seed-${i}`, category: categories[i % 4]! })),
      0,
    ),
  );
  // Each step's seeds yield one candidate each, queued at the next step.
  let selected: SelectDecision[] = [];
  for (let step = 1; step <= 6; step++) {
    const plan = planStep({
      pool,
      step,
      config: cfg,
      stats: Object.fromEntries(
        pool.members.map((m, i) => [m.taskId, stats(((i * 7 + step * 3) % 17) / 16, step)]),
      ),
      candidates: selected.map((s) => ({
        candidateId: `c-${s.taskId}-${s.step}`,
        taskId: `g-${s.taskId}-${s.step}`,
        category: s.category,
        parents: [s.taskId],
        parentPhi: s.phi,
        seedLineage: { rootSeedId: s.rootSeedId, depth: s.depth },
      })),
    });
    log.push(...plan.decisions);
    pool = plan.state;
    selected = plan.selected;
  }
  const candidate: CandidateTask = {
    id: 'g-1',
    category: 'base',
    involved_classes: ['GorillaFileSystem'],
    initial_config: { GorillaFileSystem: { root: { home: { type: 'directory', contents: {} } } } },
    question: [[{ role: 'user', content: 'Make a folder é😀.' }], [{ role: 'user', content: 'List it.' }]],
    ground_truth: [["mkdir(dir_name='é😀')"], ['ls(a=True)']],
  };
  const tools = { GorillaFileSystem: ['mkdir', 'ls'] };
  return {
    pool,
    log,
    hash: candidateHash(candidate),
    gates: checkCandidate(candidate, tools, gateLimits(cfg)),
    tooLong: checkCandidate(
      { ...candidate, ground_truth: [[`mkdir(dir_name='${'x'.repeat(201)}')`], ['ls()']] },
      tools,
      gateLimits(cfg),
    ),
  };
}
