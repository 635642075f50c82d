// The events of a small campaign for the lineage unit tests: a seed s, its child s~s2 (injected,
// then pruned), grandchild s~s2~s5 (injected), seed t retired, and another campaign's event.
import type { LineageEvent } from '../../../analysis/lineage/model.js';

export const C = 'c1';
let pos = 0;
/** One event of campaign C at the next stream position. */
export const ev = (
  type: string,
  streamId: string,
  payload: Record<string, unknown>,
  metadata: Record<string, unknown> = {},
  eventId = `e${pos + 1}`,
): LineageEvent => ({
  eventId,
  streamId,
  position: ++pos,
  type,
  payload: { campaignId: C, ...payload },
  metadata,
});

export const stats = { mean: 0.5, phi: 1, groupCount: 2, band: 'boundary' };

/** A seed s, its child s~s2 (injected, then pruned), grandchild s~s2~s5 (injected), seed t retired. */
export function events(): LineageEvent[] {
  pos = 0;
  const derive = (seed: string, child: string, step: number, depth: number, selId: string) => {
    const sid = `synth-${C}-${step}-${seed}`;
    return [
      ev(
        'SeedSelected',
        `campaign-${C}`,
        { seedTaskId: seed, step, phi: 0.9, quotaSlot: 0, stats },
        {},
        selId,
      ),
      ev('SynthesisStarted', `synthesis-${sid}`, {
        synthesisId: sid,
        seedTaskId: seed,
        selectionEventId: selId,
        generatorModel: 'gen',
      }),
      ev('StageCompleted', `synthesis-${sid}`, {
        synthesisId: sid,
        stage: 'plan',
        attempt: 0,
        model: 'gen',
        promptVersionHash: 'p'.repeat(64),
        outputHash: 'o'.repeat(64),
      }),
      ev('StageCompleted', `synthesis-${sid}`, {
        synthesisId: sid,
        stage: 'critique',
        attempt: 0,
        model: 'judge',
        promptVersionHash: 'q'.repeat(64),
        outputHash: 'r'.repeat(64),
      }),
      ev(
        'CandidateValidated',
        `synthesis-${sid}`,
        {
          synthesisId: sid,
          candidateId: child,
          seedTaskId: seed,
          candidateHash: `h-${child}`,
          judgeModel: 'judge',
          judgeScores: { alignment: 1 },
          refined: false,
        },
        {
          lineage: {
            parents: [seed],
            depth: depth - 1,
            step,
            policyVersion: `pv-${step}`,
            triggeringStats: stats,
            selectionEventId: selId,
            synthesisId: sid,
            models: { plan: 'gen' },
            promptVersions: { plan: 'p'.repeat(64) },
            stageOutputs: { plan: 'o'.repeat(64) },
            judgeVerdict: 'accept',
            judgeReasons: ['fine'],
          },
        },
      ),
      ev('TaskInjected', `campaign-${C}`, {
        taskId: child,
        candidateId: child,
        taskHash: `h-${child}`,
        parents: [seed],
        poolVersion: step + 1,
        step: step + 1,
      }),
    ];
  };
  return [
    ev('TaskSeeded', `campaign-${C}`, { taskId: 's', category: 'base', taskHash: 'hs', poolVersion: 1 }),
    ev('TaskSeeded', `campaign-${C}`, { taskId: 't', category: 'base', taskHash: 'ht', poolVersion: 1 }),
    ev('TaskBandChanged', `stats-${C}-x-0`, { taskId: 's', from: null, to: 'boundary', step: 1, stats }),
    ...derive('s', 's~s2', 2, 1, 'sel-1'),
    ...derive('s~s2', 's~s2~s5', 5, 2, 'sel-2'),
    ev('TaskRetired', `campaign-${C}`, { taskId: 't', rule: 'mastered', step: 4, poolVersion: 4, stats }),
    ev('PoolPruned', `campaign-${C}`, {
      pruned: [{ taskId: 's~s2', phi: 0.1 }],
      cap: 1,
      step: 7,
      poolVersion: 8,
    }),
    // Another campaign's event is ignored.
    { ...ev('TaskSeeded', 'campaign-other', { taskId: 'x' }), payload: { campaignId: 'other', taskId: 'x' } },
  ];
}
