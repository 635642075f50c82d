// The judge's verdict by the documented rule (prompts/judge.v*.md): accept only if every score is
// at least 0.5 and their mean at least 0.7. An LLM's verdict can contradict its own scores (it
// reasons its way to "accept" after scoring a criterion 0.2); the rule decides, and the
// disagreement is kept so a run can tell how often its judge does that. Pure.

export const JUDGE_MIN_SCORE = 0.5;
export const JUDGE_MIN_MEAN = 0.7;

export type Verdict = 'accept' | 'reject';

/** The verdict the rule gives these scores (no score at all: reject). */
export function ruleVerdict(scores: Readonly<Record<string, number>>): Verdict {
  const values = Object.values(scores);
  if (values.length === 0) return 'reject';
  const mean = values.reduce((a, b) => a + b, 0) / values.length;
  return values.every((v) => v >= JUDGE_MIN_SCORE) && mean >= JUDGE_MIN_MEAN ? 'accept' : 'reject';
}

export interface SettledJudgement<
  J extends { verdict: Verdict; scores: Record<string, number>; reasons: string[] },
> {
  /** The judgement with the rule's verdict (and, on a disagreement, a reason saying so). */
  judgement: J;
  /** Set when the judge's own verdict differed from the rule's. */
  disagreement?: { judge: Verdict; rule: Verdict };
}

/** Recomputes the verdict from the scores; the rule wins a disagreement. */
export function settleVerdict<
  J extends { verdict: Verdict; scores: Record<string, number>; reasons: string[] },
>(j: J): SettledJudgement<J> {
  const rule = ruleVerdict(j.scores);
  if (rule === j.verdict) return { judgement: j };
  return {
    judgement: {
      ...j,
      verdict: rule,
      reasons: [
        ...j.reasons,
        `the judge said ${j.verdict}, but its scores give ${rule} by the rule (every score >= ${JUDGE_MIN_SCORE}, mean >= ${JUDGE_MIN_MEAN})`,
      ],
    },
    disagreement: { judge: j.verdict, rule },
  };
}
