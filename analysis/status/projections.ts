// What PostgreSQL's projections say about a campaign's progress: its steps (declared vs counted
// groups), the batches of its oldest open step, its planned steps and its unfinished syntheses.
// These answer with no worker and no workflow (`rods campaign status` of a finished campaign).
import type pg from 'pg';
import { legacySynthesisId, synthesisId } from '../../domain/ids.js';
import { readCampaignEventsOf } from '../../platform/store/events/event-store.js';
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
 * Syntheses of the campaign that have no outcome yet: selected seeds (SeedSelected) without a
 * CandidateValidated or CandidateRejected, with when they were selected and started.
 */
export async function unfinishedSyntheses(db: pg.Pool, campaignId: string): Promise<SynthesisView[]> {
  const events = await readCampaignEventsOf(db, campaignId, [
    'SeedSelected',
    'SynthesisStarted',
    'CandidateValidated',
    'CandidateRejected',
  ]);
  const open = new Map<string, SynthesisView>();
  const aliases = new Map<string, string>();
  const done = new Set<string>();
  for (const e of events) {
    if (e.type === 'SeedSelected') {
      const { seedTaskId, step } = e.payload;
      // The run's id in either form (a campaign started before ids were made injective keeps its own).
      const id = synthesisId(campaignId, Number(step), seedTaskId);
      aliases.set(legacySynthesisId(campaignId, Number(step), seedTaskId), id);
      open.set(id, {
        synthesisId: id,
        seedTaskId,
        step: Number(step),
        selectedAt: e.recordedAt.toISOString(),
        startedAt: null,
        runningS: 0,
      });
    } else if (e.type === 'SynthesisStarted') {
      const s = open.get(aliases.get(e.payload.synthesisId) ?? e.payload.synthesisId);
      if (s) {
        s.startedAt = e.recordedAt.toISOString();
        s.synthesisId = e.payload.synthesisId;
      }
    } else done.add(aliases.get(e.payload.synthesisId) ?? e.payload.synthesisId);
  }
  return [...open.entries()].filter(([id]) => !done.has(id)).map(([, s]) => s);
}
