// A curriculum scenario over the whole pure core, run both in Node and inside Temporal's workflow
// sandbox by domain/sandbox.unit.test.ts: the two results must be identical, which shows the core
// imports nothing the sandbox lacks and computes the same decisions in either place.

import { parseCampaignConfig } from '../campaign-config.js';
import { type CandidateTask, candidateHash, checkCandidate, gateLimits } from '../candidate.js';
import {
  applyDecisions,
  EMPTY_POOL,
  type PoolDecision,
  planDecisions,
  planInjection,
  queueCandidate,
  retire,
  seedTasks,
  selectSeeds,
  type TaskStats,
} from '../pool.js';

function stats(m: number, step: number): TaskStats {
  return {
    groupCount: 1,
    count: 16,
    mean: m,
    m2: 16 * m * (1 - m),
    variance: m * (1 - m),
    latestGroupMean: m,
    latestGroupVariance: m * (1 - m),
    ewma: m,
    signal: m,
    phi: 4 * m * (1 - m),
    band: m < 0.2 ? 'hard' : m > 0.85 ? 'mastered' : 'boundary',
    lastStep: step,
  };
}

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
  for (let step = 1; step <= 6; step++) {
    fold(
      pool.members.map((m, i) => ({
        kind: 'observe',
        taskId: m.taskId,
        stats: stats(((i * 7 + step * 3) % 17) / 16, step),
      })),
    );
    fold(retire(pool, undefined, step, cfg));
    const selected = selectSeeds(pool, undefined, step, cfg);
    fold(selected);
    for (const s of selected) {
      fold([
        queueCandidate(
          pool,
          {
            candidateId: `c-${s.taskId}-${step}`,
            taskId: `g-${s.taskId}-${step}`,
            category: s.category,
            parents: [s.taskId],
            parentPhi: s.phi,
          },
          step,
        ),
      ]);
    }
    fold(planDecisions(planInjection(pool, step, cfg)));
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
