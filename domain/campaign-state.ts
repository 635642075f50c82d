// What the campaign workflow holds and reports: its status, the state it carries over
// continue-as-new, and a synthesis child's outcome. Read by the workflow, the status tools and the
// CLI alike, so it lives below all of them.
import type { StepPlan } from './step-plan.js';

export type CampaignStatusName = 'seeding' | 'running' | 'paused' | 'stopped';

export interface CampaignCarry {
  status: CampaignStatusName;
  /** Last planned step (0: only seeded). */
  step: number;
  poolVersion: number;
  seeded: boolean;
  /** synthesisId -> seed task id of the syntheses still running. */
  running: Record<string, string>;
  totals: {
    selected: number;
    validated: number;
    rejected: number;
    injected: number;
    retired: number;
    pruned: number;
  };
  lastPlan?: Omit<StepPlan, 'selected'> & { selected: string[] };
  config: unknown;
  /** Continue-as-new generations so far. */
  generation: number;
}

export interface CampaignStatus extends CampaignCarry {
  campaignId: string;
  workflowId: string;
  historyLength: number;
}

/** How a synthesis child ended, as it signals its campaign. */
export interface SynthesisOutcome {
  synthesisId: string;
  outcome: 'validated' | 'rejected';
  candidateId?: string;
  reasonCode?: string;
}
