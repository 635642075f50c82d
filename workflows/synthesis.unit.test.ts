// The synthesis workflow on Temporal's time-skipping test server with mocked activities: a
// config-patch repair and a refinement that end validated, re-planning around a failing function
// that ends rejected, and a judge that keeps rejecting. What it decided is read from the calls.
import { describe, expect, it } from 'vitest';
import type { SelectedSeed } from '../domain/step-plan.js';
import { useWorkflowEnv } from '../test/support/workflow-env.js';
import { type SynthesisInput, synthesisWorkflow } from './synthesis.js';

const env = useWorkflowEnv();

const TASK = { id: 'multi_turn_base_3', category: 'base', question: [], ground_truth: [['ls()']] };

function input(synthesisId: string, config: unknown = {}): SynthesisInput {
  const seed = {
    taskId: TASK.id,
    category: 'base',
    phi: 0.25,
    quotaSlot: 0,
    stats: {},
    rootSeedId: TASK.id,
    depth: 0,
    selectionEventId: 'sel-1',
    policyVersion: 'p7',
    task: TASK,
  } as unknown as SelectedSeed;
  return { campaignId: 'c-syn', synthesisId, step: 4, seed, config, parentWorkflowId: 'no-parent' };
}

const candidate = (n: number) => ({
  id: 'cand-1',
  category: 'base',
  question: [[{ role: 'user', content: `draft ${n}` }]],
  ground_truth: [['cd(folder="docs")', 'ls()']],
});
const llmAnswer = (value: unknown) => ({ value, model: 'standin', promptHash: 'p', outputHash: 'o' });
const withCandidate = (n: number) => ({
  candidate: candidate(n),
  model: 'standin',
  promptHash: 'p',
  outputHash: 'o',
});

type Failure = { kind: string; call: string; reason: string };
interface Script {
  /** executeCandidate's answers in order (the last one repeats). */
  executions: ({ ok: true } | Failure)[];
  /** The judge's verdicts in order (the last one repeats). */
  verdicts: ('accept' | 'reject')[];
}

function activities(script: Script) {
  const calls: { name: string; input: Record<string, unknown> }[] = [];
  let executions = 0;
  let judged = 0;
  const rec =
    <R>(name: string, answer: (input: Record<string, unknown>) => R) =>
    async (i: Record<string, unknown>) => {
      calls.push({ name, input: JSON.parse(JSON.stringify(i)) });
      return answer(i);
    };
  const mocks = {
    synthesisStarted: rec('synthesisStarted', () => ({})),
    stageCompleted: rec('stageCompleted', () => ({})),
    planTask: rec('planTask', () => llmAnswer({ narrative: 'a folder tour' })),
    generateCandidate: rec('generateCandidate', () => withCandidate(0)),
    patchConfig: rec('patchConfig', (i) => withCandidate(Number(i.repair))),
    executeCandidate: rec('executeCandidate', () => {
      const e = script.executions[Math.min(executions++, script.executions.length - 1)]!;
      return 'ok' in e ? { ok: true, failure: null } : { ok: false, failure: e };
    }),
    rewriteCandidate: rec('rewriteCandidate', () => withCandidate(10)),
    gateCandidate: rec('gateCandidate', () => ({ ok: true })),
    judgeCandidate: rec('judgeCandidate', () => {
      const verdict = script.verdicts[Math.min(judged++, script.verdicts.length - 1)]!;
      return llmAnswer({
        verdict,
        scores: { coherence: verdict === 'accept' ? 4 : 2 },
        reasons: [`judged ${verdict}`],
      });
    }),
    refineCandidate: rec('refineCandidate', () => withCandidate(20)),
    augmentCandidate: rec('augmentCandidate', (i) => ({
      variant: { ...candidate(30), id: `cand-1~${i.kind}`, category: i.kind },
      model: 'standin',
      promptHash: 'p',
      outputHash: 'o',
    })),
    recordOutcome: rec('recordOutcome', (i) =>
      i.kind === 'validated'
        ? { outcome: 'validated', candidateId: 'cand-1' }
        : { outcome: 'rejected', reasonCode: i.reasonCode },
    ),
  };
  return { mocks, calls, named: (n: string) => calls.filter((c) => c.name === n).map((c) => c.input) };
}

const run = (a: ReturnType<typeof activities>, id: string, config: unknown = {}) =>
  env().withWorker(a.mocks, (taskQueue) =>
    env().env.client.workflow.execute(synthesisWorkflow, {
      taskQueue,
      workflowId: id,
      args: [input(id, config)],
    }),
  );

const CONFIG_FAILURE: Failure = {
  kind: 'config',
  call: 'cd(folder="docs")',
  reason: 'no folder docs in the config',
};

describe('synthesis workflow (time-skipping test server, mocked activities)', () => {
  it('a config failure is repaired once, a rejected judgement refined once, and the candidate is validated with that lineage', async () => {
    const a = activities({ executions: [CONFIG_FAILURE, { ok: true }], verdicts: ['reject', 'accept'] });
    expect(await run(a, 'syn-repair')).toEqual({
      synthesisId: 'syn-repair',
      outcome: 'validated',
      candidateId: 'cand-1',
    });
    expect(a.named('patchConfig')).toEqual([
      expect.objectContaining({ repair: 1, failure: CONFIG_FAILURE, attempt: 1 }),
    ]);
    // Plan and execute once, the repair, then a fresh re-execution in each critique round.
    expect(a.named('executeCandidate')).toHaveLength(4);
    expect(a.named('judgeCandidate').map((i) => i.attempt)).toEqual([0, 1]);
    expect(a.named('refineCandidate')).toHaveLength(1);
    const outcome = a.named('recordOutcome')[0]!;
    expect(outcome).toMatchObject({
      kind: 'validated',
      refined: true,
      candidate: candidate(20),
      judge: { reasons: ['judged accept'] },
      lineage: { parents: [TASK.id], step: 4, policyVersion: 'p7', judgeVerdict: 'accept' },
    });
    expect(a.named('stageCompleted').map((i) => i.stage)).toEqual(['execute', 'critique']);
  }, 60_000);

  it('a function that keeps failing is blocklisted for the next plans; after the repair budget the candidate is rejected', async () => {
    const failing: Failure = { kind: 'execution', call: 'cd(folder="docs")', reason: 'cd: no such folder' };
    const a = activities({ executions: [failing], verdicts: ['accept'] });
    expect(await run(a, 'syn-reject')).toEqual({
      synthesisId: 'syn-reject',
      outcome: 'rejected',
      reasonCode: 'execution-failed',
    });
    // maxConfigRepairs 3 (the default): 3 repairs in all across the plans, 4 plans at most.
    expect(a.named('patchConfig')).toHaveLength(3);
    expect(a.named('planTask').map((i) => i.blocklist)).toEqual([[], ['cd'], ['cd'], ['cd']]);
    expect(a.named('judgeCandidate')).toEqual([]);
    expect(a.named('recordOutcome')).toEqual([
      expect.objectContaining({ kind: 'rejected', stage: 'execute', reasonCode: 'execution-failed' }),
    ]);
    expect(a.named('recordOutcome')[0]!.reason).toMatch(/blocklist: cd/);
  }, 60_000);

  it('a judge that rejects after the one refinement allowed rejects the candidate (judge-rejected)', async () => {
    const a = activities({ executions: [{ ok: true }], verdicts: ['reject'] });
    expect(await run(a, 'syn-judge')).toMatchObject({ outcome: 'rejected', reasonCode: 'judge-rejected' });
    expect(a.named('judgeCandidate')).toHaveLength(2);
    expect(a.named('refineCandidate')).toHaveLength(1);
    expect(a.named('recordOutcome')).toEqual([
      expect.objectContaining({ kind: 'rejected', stage: 'critique', reasonCode: 'judge-rejected' }),
    ]);
  }, 60_000);

  it('Augment: each variant of the validated base is critiqued on its own; a rejected variant leaves the base validated', async () => {
    // The base is accepted, the miss_func variant accepted, the miss_param variant rejected.
    const a = activities({ executions: [{ ok: true }], verdicts: ['accept', 'accept', 'reject'] });
    const config = { synthesis: { augment: { missingFunction: true, missingParameter: true } } };
    expect(await run(a, 'syn-aug', config)).toEqual({
      synthesisId: 'syn-aug',
      outcome: 'validated',
      candidateId: 'cand-1',
    });
    expect(a.named('augmentCandidate').map((i) => [i.kind, i.synthesisId])).toEqual([
      ['miss_func', 'syn-aug~miss_func'],
      ['miss_param', 'syn-aug~miss_param'],
    ]);
    // Each variant through the gates (as a variant) and a fresh re-execution; no refinement.
    expect(a.named('gateCandidate').filter((i) => i.variant)).toHaveLength(2);
    expect(a.named('refineCandidate')).toEqual([]);
    const outcomes = a.named('recordOutcome');
    expect(outcomes).toEqual([
      expect.objectContaining({ kind: 'validated', synthesisId: 'syn-aug' }),
      expect.objectContaining({
        kind: 'validated',
        synthesisId: 'syn-aug~miss_func',
        derivedFrom: 'cand-1',
        lineage: expect.objectContaining({
          parents: ['cand-1', TASK.id],
          variantKind: 'miss_func',
          depth: 1,
        }),
      }),
      expect.objectContaining({
        kind: 'rejected',
        synthesisId: 'syn-aug~miss_param',
        reasonCode: 'judge-rejected',
      }),
    ]);
  }, 60_000);
});
