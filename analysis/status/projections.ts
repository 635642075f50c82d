// What PostgreSQL's projections say about a campaign's progress: its steps (declared vs counted
// groups), the batches of its oldest open step, its planned steps and its unfinished syntheses.
// These answer with no worker and no workflow (`rods campaign status` of a finished campaign).
import type pg from 'pg';
import { openSyntheses } from '../../platform/store/pool/open-syntheses.js';
import type { StepRowView } from '../../platform/store/steps/view.js';
import type { SynthesisView, WaitingFor } from './report.js';

/** What the oldest open step waits for, from its counts and its batches. */
export function waitingFor(
  oldest: StepRowView,
  batches: readonly { closes: boolean; status: string }[],
): WaitingFor[] {
  const out: WaitingFor[] = [];
  const counted = oldest.appliedGroups + oldest.rejectedGroups;
  if (batches.length === 0 && counted === 0) out.push('trainer-batches');
  else if (!batches.some((b) => b.closes) && oldest.declaredGroups === null) out.push('trainer-close');
  if (batches.some((b) => b.status === 'accepted')) out.push('unpublished-batches');
  const closingPublished = batches.some((b) => b.closes && b.status !== 'accepted');
  if (oldest.declaredGroups === null) {
    if (closingPublished) out.push('aggregator-declare');
  } else if (counted < oldest.declaredGroups) out.push('aggregator-groups');
  else if (!oldest.closedAt) out.push('aggregator-close');
  return out;
}

/**
 * Syntheses of the campaign that have no outcome yet: selected seeds without a CandidateValidated
 * or CandidateRejected, with when they were selected and started (the open_syntheses projection,
 * platform/store/pool/open-syntheses.ts: the runs in flight, not the campaign's history).
 */
export async function unfinishedSyntheses(db: pg.Pool, campaignId: string): Promise<SynthesisView[]> {
  return (await openSyntheses(db, campaignId)).map((r) => ({
    synthesisId: r.synthesisId,
    seedTaskId: r.seedTaskId,
    step: r.step,
    selectedAt: r.selectedAt.toISOString(),
    startedAt: r.startedAt?.toISOString() ?? null,
    runningS: 0,
  }));
}
