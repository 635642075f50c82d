// Regression vectors: the values the code produced before the ids moved here (platform/util/ids.ts with
// node:crypto, domain/streams.ts, the aggregator's and CLI's own builders). Recorded streams,
// Temporal histories and idempotent appends depend on them, so they must never change. The ones
// made injective (synthesis, stats and ingestion ids, the aggregator's derived event ids) changed
// once, on purpose: their old forms are kept where recorded data needs them (legacySynthesisId,
// the prefixes of old streams). Then, property tests over adversarial ids: no two distinct inputs
// give one id.
import { createHash } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import {
  campaignStreamPrefixes,
  candidateId,
  derivationKey,
  derivedUuid,
  eventIds,
  legacyCandidateId,
  legacySynthesisId,
  openLineageRunId,
  parentRef,
  rolloutBatchClaimId,
  streams,
  synthesisId,
  useSha256,
  variantCandidateId,
  variantSynthesisId,
  workflowIds,
} from './ids.js';
import { pureSha256 } from './sha256.js';

const C = 'demo-1';
const T = 'multi_turn_base_17';
const S = 'synth:demo-1:3:multi_turn_base_17';
const LEGACY_S = 'synth-demo-1-3-multi_turn_base_17';
const G = '0b7e4c3a-1111-8222-9333-444455556666';

describe('stream names, prefixes and workflow ids', () => {
  it('keep the recorded strings', () => {
    expect(streams.campaign(C)).toBe('campaign-demo-1');
    expect(streams.synthesis(S)).toBe('synthesis-synth:demo-1:3:multi_turn_base_17');
    expect(streams.stats(C, 'rods.rewards.v1', 4)).toBe('stats:demo-1:rods.rewards.v1:4');
    expect(streams.steps(C)).toBe('steps-demo-1');
    expect(synthesisId(C, 3, T)).toBe(S);
    expect(legacySynthesisId(C, 3, T)).toBe(LEGACY_S);
    expect(candidateId(T, 2)).toBe('multi_turn_base_17~s2');
    expect(variantCandidateId(candidateId(T, 2), 'miss_func')).toBe('multi_turn_base_17~s2~miss_func');
    // A generated parent is named by its root seed and 48 bits of SHA-256 of its id.
    expect(candidateId(`${T}~s2`, 9)).toBe('multi_turn_base_17~d16da04d013c~s9');
    expect(legacyCandidateId(`${T}~s2`, 9)).toBe('multi_turn_base_17~s2~s9');
    expect(legacyCandidateId(T, 2)).toBe(candidateId(T, 2));
    const vs = variantSynthesisId(S, 'miss_param');
    expect(vs).toBe('synth:demo-1:3:multi_turn_base_17~miss_param');
    // a variant's stream is the campaign's (the audit covers it), its outcome ids its own
    expect(streams.synthesis(vs).startsWith(campaignStreamPrefixes(C)[1]!)).toBe(true);
    expect(eventIds.candidateValidated(vs)).not.toBe(eventIds.candidateValidated(S));
    expect(workflowIds.campaign(C)).toBe('campaign-demo-1');
    expect(workflowIds.synthesis(S)).toBe(S);
    expect(workflowIds.ingestion(C, 3, 'b1')).toBe('ingest:demo-1:3:b1');
    expect(workflowIds.doctor('abc')).toBe('doctor-abc');
  });

  it('select every stream of a campaign and none of an unrelated one', () => {
    const prefixes = campaignStreamPrefixes(C);
    expect(prefixes).toEqual([
      'campaign-demo-1',
      'synthesis-synth:demo-1:',
      'stats:demo-1:',
      'steps-demo-1',
      'checkpoints-demo-1',
      'synthesis-synth-demo-1-',
      'stats-demo-1-',
    ]);
    const own = [
      streams.campaign(C),
      streams.synthesis(synthesisId(C, 12, T)),
      streams.stats(C, 'rods.rewards.v1', 0),
      streams.steps(C),
      streams.checkpoints(C),
    ];
    for (const s of own) expect(prefixes.some((p) => s.startsWith(p))).toBe(true);
    const other = ['x', 'demo-2'].flatMap((c) => [
      streams.campaign(c),
      streams.synthesis(synthesisId(c, 12, T)),
      streams.stats(c, 'rods.rewards.v1', 0),
      streams.steps(c),
      streams.checkpoints(c),
    ]);
    for (const s of other) expect(prefixes.some((p) => s.startsWith(p))).toBe(false);
  });
});

const EV = 'c1~run-1-step-5~0123456789ab';

describe('derived ids', () => {
  it('keep the recorded values', () => {
    expect({
      campaignStarted: eventIds.campaignStarted(C),
      taskSeeded: eventIds.taskSeeded(C, T),
      taskRetired: eventIds.taskRetired(C, T, 3),
      seedSelected: eventIds.seedSelected(C, T, 3),
      candidateDiscarded: eventIds.candidateDiscarded(C, `${T}~s2`),
      taskInjected: eventIds.taskInjected(C, `${T}~s2`),
      poolPruned: eventIds.poolPruned(C, 3),
      synthesisStarted: eventIds.synthesisStarted(LEGACY_S),
      stageCompleted: eventIds.stageCompleted(LEGACY_S, 'plan', 1),
      stageFailed: eventIds.stageFailed(LEGACY_S, 'plan', 1),
      candidateRejected: eventIds.candidateRejected(LEGACY_S),
      candidateValidated: eventIds.candidateValidated(LEGACY_S),
      rolloutGroupScored: eventIds.rolloutGroupScored(C, 3, 'b1', T),
      stepClosed: eventIds.stepClosed(C, 3),
      stepAggregated: eventIds.stepAggregated(C, 3),
      taskBandChanged: eventIds.taskBandChanged(C, G),
      taskStatsUpdated: eventIds.taskStatsUpdated(C, G),
      deadLettered: eventIds.deadLettered('rods.rewards.v1', 2, '1234', 'unknown-fingerprint'),
      traceRolloutGroup: eventIds.traceRolloutGroup(C, 42, 3, 7),
      traceStepClosed: eventIds.traceStepClosed(C, 3),
      simulatedRolloutGroup: eventIds.simulatedRolloutGroup(C, 3, T),
      simulatedStepClosed: eventIds.simulatedStepClosed(C, 3),
      rolloutBatchClaim: rolloutBatchClaimId(C, 3, 'b1'),
      openLineageRun: openLineageRunId(C, LEGACY_S),
      checkpointSaved: eventIds.checkpointSaved(C, 'run-1-step-5'),
      evaluationStarted: eventIds.evaluationStarted(EV),
      evaluationTaskScored: eventIds.evaluationTaskScored(EV, 'multi_turn_base_150'),
      evaluationCompleted: eventIds.evaluationCompleted(EV),
      evaluationFailed: eventIds.evaluationFailed(EV),
    }).toEqual({
      campaignStarted: 'e297dd2c-b794-8c7f-bac3-75587dfd2904',
      taskSeeded: '83545dc7-c8e7-81b4-beac-60c7bb674cd8',
      taskRetired: '2cb5c25c-8df7-8058-9e70-c15caf29e341',
      seedSelected: '51221232-fa7c-8400-a8d4-71beb7deb91b',
      candidateDiscarded: '066cc256-5950-8b7b-a449-05f573712236',
      taskInjected: '90e8e804-1f33-8183-b0ec-e1a3e82e3b90',
      poolPruned: '5e4e10f6-b2d1-8326-be79-aeb7b45510da',
      synthesisStarted: '645e2126-0d25-803d-93d5-4f537d5a9a65',
      stageCompleted: '7ed86e11-036e-82b4-a25d-80a04f992c2e',
      stageFailed: '8679b3fb-266a-84ed-964c-17066de26d80',
      candidateRejected: 'c99a7ca9-ca3c-8859-861c-283b406b7446',
      candidateValidated: '224bce2b-34b5-8257-b1a0-aadb854c1484',
      rolloutGroupScored: 'bd87cd35-4d79-8860-858f-b9f49525ea86',
      stepClosed: 'a4354dbf-a0ec-864a-a0ce-e2c38e644078',
      stepAggregated: '4214d9eb-7ece-8106-8855-dd366f16ad8a',
      taskBandChanged: '4f9f17d1-36f7-8f15-8fe9-d41b11202b76', // with the campaign since ids were made injective
      taskStatsUpdated: '02be1e64-6856-8489-89fe-6eeb89c1f552',
      deadLettered: 'ff88d35b-333a-865e-bfa2-6d74257ace27',
      traceRolloutGroup: '5afea463-e408-8592-83f5-b559b6c2c32e',
      traceStepClosed: 'f03344dd-0280-84cf-8744-4129a4dbdb5d',
      simulatedRolloutGroup: 'ae4d2eef-7107-8581-95fb-d2bfdc4556c6',
      simulatedStepClosed: '28a80f0b-1ba3-84ae-9eff-ce79d641967c',
      rolloutBatchClaim: '859a0ef9-a333-8317-a424-5a7c44366e70',
      openLineageRun: '181aa3b6-6188-8aca-a1b7-29028c3d0e3a',
      checkpointSaved: '92588258-32f7-8813-82d4-184d202cffe6',
      evaluationStarted: '33ab7b99-f37d-830a-8c45-f5d1f953fe3a',
      evaluationTaskScored: '40697716-3b9e-87b9-ab68-aed7602bbd42',
      evaluationCompleted: 'a705a18f-d380-82f0-b563-493a630ba492',
      evaluationFailed: '340978bc-63be-8542-bb2d-ea1e5dd37f18',
    });
    // a numeric offset names the same dead letter as its string form
    expect(eventIds.deadLettered('rods.rewards.v1', 2, 1234, 'unknown-fingerprint')).toBe(
      'ff88d35b-333a-865e-bfa2-6d74257ace27',
    );
  });

  it('hash non-ASCII parts as UTF-8, an unpaired surrogate as U+FFFD', () => {
    expect(derivedUuid('TaskSeeded', 'kampanj-å', 'tâche-€-😀')).toBe('d37cceed-92a8-878f-a394-382017f85e20');
    expect(derivedUuid('TaskSeeded', 'x\ud800y')).toBe('61c7aa43-bb51-8e1f-82b1-fad7ee95db73');
  });

  it('agree with node:crypto SHA-256 (version 8, RFC 4122 variant)', () => {
    for (const parts of [['a'], ['StepClosed', C, 3], [T, 0, ''], ['é', 'x'.repeat(200)]]) {
      const h = createHash('sha256').update(parts.join('\u001f')).digest();
      h[6] = (h[6]! & 0x0f) | 0x80;
      h[8] = (h[8]! & 0x3f) | 0x80;
      const x = h.subarray(0, 16).toString('hex');
      const id = derivedUuid(...parts);
      expect(id.replaceAll('-', '')).toBe(x);
      expect(id).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-8[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
    }
  });

  it('are the same bytes with the node:crypto implementation processes install', () => {
    const parts: (string | number)[][] = [
      ['a'],
      ['StepClosed', C, 3],
      [T, 0, ''],
      ['é\u001f\ud800', 'x'.repeat(200)],
    ];
    const pure = parts.map((p) => derivedUuid(...p));
    let calls = 0;
    useSha256((data) => {
      calls++;
      return createHash('sha256').update(data).digest();
    });
    try {
      expect(parts.map((p) => derivedUuid(...p))).toEqual(pure);
      expect(calls).toBe(parts.length);
    } finally {
      useSha256(pureSha256);
    }
  });

  it('differ when any part differs, and parts do not run together', () => {
    expect(eventIds.taskSeeded(C, T)).not.toBe(eventIds.taskSeeded('demo-2', T));
    expect(eventIds.seedSelected(C, T, 3)).not.toBe(eventIds.seedSelected(C, T, 4));
    expect(derivedUuid('ab', 'c')).not.toBe(derivedUuid('a', 'bc'));
    // a part holding the separator no longer runs into the next one
    expect(derivedUuid('a\u001fb', 'c')).not.toBe(derivedUuid('a', 'b\u001fc'));
    expect(derivationKey(['a\u001fb', 'c'])).toBe('\u001e611f62\u001fc');
    // two campaigns fed by one producer run carry the same group event ids: the aggregator's differ
    expect(eventIds.taskBandChanged('a', G)).not.toBe(eventIds.taskBandChanged('b', G));
    expect(eventIds.taskStatsUpdated('a', G)).not.toBe(eventIds.taskStatsUpdated('b', G));
  });
});

// Adversarial ids: separators of every builder, case, long shared prefixes, Unicode, digits.
const ID_CHARS = [
  'a',
  'A',
  '1',
  '2',
  '-',
  '_',
  '.',
  ':',
  '~',
  's',
  '/',
  ' ',
  'é',
  '😀',
  '\u001f',
  '\u001e',
  '%',
];
function rng(seed: number) {
  let x = seed;
  return () => {
    x = (x * 1103515245 + 12345) % 2 ** 31;
    return x / 2 ** 31;
  };
}
function adversarial(r: () => number, chars = ID_CHARS): string {
  const long = r() < 0.2 ? 'campaign-with-a-long-shared-prefix-0123456789-'.repeat(2) : '';
  const n = 1 + Math.floor(r() * 5);
  let s = long;
  for (let i = 0; i < n; i++) s += chars[Math.floor(r() * chars.length)];
  return s;
}
// Campaign and batch ids as the gateway takes them (ID_PATTERN); task ids are free text.
const ID_PATTERN_CHARS = ['a', 'A', '1', '2', '-', '_', '.'];

describe('no two distinct inputs give one id', () => {
  const r = rng(42);
  const campaigns = Array.from({ length: 60 }, () => `x${adversarial(r, ID_PATTERN_CHARS)}`);
  const batches = Array.from({ length: 30 }, () => `b${adversarial(r, ID_PATTERN_CHARS)}`);
  const tasks = Array.from({ length: 40 }, () => adversarial(r));
  const steps = [0, 1, 2, 12, 21, 123];
  const topics = ['rods.rewards.v1', 't', 't-1', 'rods-x'];

  function expectInjective<T>(name: string, inputs: T[], f: (x: T) => string) {
    const seen = new Map<string, string>();
    for (const x of inputs) {
      const id = f(x);
      const key = JSON.stringify(x);
      const before = seen.get(id);
      if (before !== undefined && before !== key)
        throw new Error(`${name}: ${before} and ${key} both give ${id}`);
      seen.set(id, key);
    }
  }
  const combos = <A, B, C>(as: A[], bs: B[], cs: C[]) =>
    as.flatMap((a) => bs.flatMap((b) => cs.map((c) => [a, b, c] as const)));

  it('workflow ids and synthesis ids, with the legacy forms shown to collide', () => {
    expectInjective('ingestion', combos(campaigns, steps, batches), ([c, s, b]) =>
      workflowIds.ingestion(c, s, b),
    );
    expectInjective('synthesisId', combos(campaigns, steps, tasks), ([c, s, t]) => synthesisId(c, s, t));
    expect(workflowIds.ingestion('a', 1, '2-x')).not.toBe(workflowIds.ingestion('a-1', 2, 'x'));
    expect(legacySynthesisId('a', 1, '2-x')).toBe(legacySynthesisId('a-1', 2, 'x')); // why it was replaced
  });

  it('stream names', () => {
    expectInjective('stats', combos(campaigns, topics, [0, 1, 11]), ([c, t, p]) => streams.stats(c, t, p));
    expectInjective('campaign', campaigns, (c) => streams.campaign(c));
    expectInjective('steps', campaigns, (c) => streams.steps(c));
    expect(streams.stats('a', 'b-c', 0)).not.toBe(streams.stats('a-b', 'c', 0));
  });

  it('derived ids (their SHA-256 inputs) over parts holding separators, case and Unicode', () => {
    const parts = Array.from({ length: 400 }, () => [adversarial(r), adversarial(r)] as const);
    expectInjective('derivationKey', parts, ([a, b]) => derivationKey(['K', a, b]));
    expectInjective('candidateId', combos(tasks, steps, [0]), ([t, s]) => candidateId(t, s));
    expectInjective('parentRef', tasks, (t) => parentRef(t));
    expectInjective('variantCandidateId', combos(tasks, ['miss_func', 'miss_param'], [0]), ([t, k]) =>
      variantCandidateId(t, k),
    );
  });
});

describe('candidate ids down a lineage', () => {
  it('stay bounded at any depth, distinct per parent and step, and name their root seed', () => {
    const chain = ['multi_turn_long_context_199'];
    for (let step = 1; step <= 2000; step++) chain.push(candidateId(chain.at(-1)!, step));
    const lengths = chain.map((id) => id.length);
    expect(Math.max(...lengths)).toBeLessThanOrEqual('multi_turn_long_context_199'.length + 1 + 12 + 2 + 4);
    expect(new Set(chain).size).toBe(chain.length);
    expect(chain.every((id) => id.startsWith('multi_turn_long_context_199'))).toBe(true);
    // Two parents under one root selected at one step give two candidates.
    expect(candidateId(chain[5]!, 7)).not.toBe(candidateId(chain[6]!, 7));
    // The legacy form grows by a generation each time.
    let legacy = 'multi_turn_long_context_199';
    for (let step = 1; step <= 100; step++) legacy = legacyCandidateId(legacy, step);
    expect(legacy.length).toBeGreaterThan(400);
  });
});
