import { describe, expect, it } from 'vitest';
import { ruleVerdict, settleVerdict } from './judge-rule.js';

const scores = (...v: number[]) =>
  Object.fromEntries(
    ['alignment', 'state_consistency', 'coherence', 'naturalness', 'ambiguity'].map((k, i) => [k, v[i]!]),
  );

describe('the judge rule', () => {
  it('accepts only when every score is >= 0.5 and the mean >= 0.7', () => {
    expect(ruleVerdict(scores(0.7, 0.7, 0.7, 0.7, 0.7))).toBe('accept');
    expect(ruleVerdict(scores(1, 1, 1, 1, 0.49))).toBe('reject'); // mean 0.898, one score low
    expect(ruleVerdict(scores(0.5, 0.5, 0.5, 0.5, 1))).toBe('reject'); // mean 0.6
    expect(ruleVerdict(scores(0.5, 0.5, 1, 1, 0.5))).toBe('accept'); // mean 0.7 exactly
    expect(ruleVerdict({})).toBe('reject');
  });

  it('keeps a verdict that agrees with the scores as it is', () => {
    const j = { verdict: 'accept' as const, scores: scores(0.9, 0.9, 0.9, 0.9, 0.9), reasons: [] };
    expect(settleVerdict(j)).toEqual({ judgement: j });
  });

  it('overrides a verdict that contradicts the scores, saying so, and reports the disagreement', () => {
    const lenient = settleVerdict({
      verdict: 'accept',
      scores: scores(0.9, 0.2, 0.9, 0.9, 0.9),
      reasons: ['fine'],
    });
    expect(lenient.judgement.verdict).toBe('reject');
    expect(lenient.disagreement).toEqual({ judge: 'accept', rule: 'reject' });
    expect(lenient.judgement.reasons).toEqual([
      'fine',
      'the judge said accept, but its scores give reject by the rule (every score >= 0.5, mean >= 0.7)',
    ]);
    const harsh = settleVerdict({ verdict: 'reject', scores: scores(0.8, 0.8, 0.8, 0.8, 0.8), reasons: [] });
    expect(harsh.judgement.verdict).toBe('accept');
    expect(harsh.disagreement).toEqual({ judge: 'reject', rule: 'accept' });
  });
});
