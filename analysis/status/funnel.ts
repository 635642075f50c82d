// The synthesis funnel of a campaign, per stage: how many runs reached each stage, how many
// candidates came out validated, rejected (by reason) and injected. The dashboard and the demo's
// report show it. It reads the counts the pool projection keeps with every event it records
// (platform/store/pool/funnel.ts), a handful of rows whatever the campaign's age.
import type pg from 'pg';
import { promptVersion } from '../../platform/config/prompts.js';
import { lastPlannedStep, recordedPlan } from '../../platform/store/campaign-plans.js';
import { type StageTokens, synthesisFunnelRows, synthesisTokens } from '../../platform/store/pool/funnel.js';

export interface SynthesisFunnel {
  /** Seeds selected for synthesis (one run each). */
  selected: number;
  /** Runs whose stage completed at least once: plan, executed (ground truth ran), repaired (a config patch was applied), rewritten, judged (the LLM judge answered), augmented. */
  planned: number;
  executed: number;
  repaired: number;
  rewritten: number;
  judged: number;
  augmented: number;
  validated: number;
  rejected: number;
  rejectedByReason: Record<string, number>;
  injected: number;
}

/**
 * The funnel of one campaign: distinct synthesis runs per stage (a variant's stages count for its
 * run), events for the rest (validated and rejected include Augment variants).
 */
export async function synthesisFunnel(
  db: pg.Pool | pg.PoolClient,
  campaignId: string,
): Promise<SynthesisFunnel> {
  const rows = await synthesisFunnelRows(db, campaignId, promptVersion('config-patch'));
  const count = (type: string, stage?: string, key?: string) =>
    rows
      .filter(
        (r) =>
          r.type === type &&
          (stage === undefined || r.stage === stage) &&
          (key === undefined || r.key === key),
      )
      .reduce((a, r) => a + r.n, 0);
  // A reason can come from several stages (a run that ended without an outcome): its rows add up.
  const rejectedByReason: Record<string, number> = {};
  for (const r of rows)
    if (r.type === 'CandidateRejected')
      rejectedByReason[r.key ?? 'unknown'] = (rejectedByReason[r.key ?? 'unknown'] ?? 0) + r.n;
  return {
    selected: count('SeedSelected'),
    planned: count('StageCompleted', 'plan'),
    // the env stage records 'execute' without a model once the ground truth ran
    executed: count('StageCompleted', 'execute', 'no-model'),
    repaired: count('StageCompleted', 'execute', 'repair'),
    rewritten: count('StageCompleted', 'rewrite'),
    judged: count('StageCompleted', 'critique', 'model'),
    augmented: count('StageCompleted', 'augment'),
    validated: count('CandidateValidated'),
    rejected: count('CandidateRejected'),
    rejectedByReason,
    injected: count('TaskInjected'),
  };
}

/** What the generator cost the campaign in tokens, and per funnel outcome. */
export interface GeneratorCost {
  /** Tokens of every synthesis stage that reported usage (StageCompleted v2), failed ones included (StageFailed). */
  tokens: { prompt: number; completion: number; total: number };
  byStage: StageTokens[];
  /** Total tokens per selected run, per validated candidate, per injected task (null: none yet). */
  perSelected: number | null;
  perValidated: number | null;
  perInjected: number | null;
  /**
   * Generated tasks, ever, seen in the boundary band within pool.usefulWithinSteps of their
   * injection (the newest plan's count), and the total tokens per such useful task.
   */
  useful: number;
  perUseful: number | null;
}

/** The campaign's generator tokens over its funnel: all tokens spent, divided by each outcome. */
export async function generatorCost(
  db: pg.Pool | pg.PoolClient,
  campaignId: string,
  funnel: Pick<SynthesisFunnel, 'selected' | 'validated' | 'injected'>,
): Promise<GeneratorCost> {
  const byStage = await synthesisTokens(db, campaignId);
  const prompt = byStage.reduce((a, s) => a + s.promptTokens, 0);
  const completion = byStage.reduce((a, s) => a + s.completionTokens, 0);
  const total = prompt + completion;
  const per = (n: number) => (n > 0 && total > 0 ? Math.round(total / n) : null);
  const last = await recordedPlan<{ useful?: number }>(db, campaignId, await lastPlannedStep(db, campaignId));
  const useful = last?.useful ?? 0;
  return {
    tokens: { prompt, completion, total },
    byStage,
    perSelected: per(funnel.selected),
    perValidated: per(funnel.validated),
    perInjected: per(funnel.injected),
    useful,
    perUseful: per(useful),
  };
}
