// What PostgreSQL's projections say about a campaign's progress: its steps (declared vs counted
// groups), the batches of its oldest open step, its planned steps and its unfinished syntheses.
// These answer with no worker and no workflow (`rods campaign status` of a finished campaign).
import type pg from 'pg';
import { legacySynthesisId, synthesisId } from '../domain/ids.js';
import type { StepRowView } from '../store/steps/view.js';
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
  const { rows } = await db.query<{
    type: string;
    synthesis_id: string | null;
    seed_task_id: string | null;
    step: string | null;
    recorded_at: Date;
  }>(
    `select type, payload ->> 'synthesisId' as synthesis_id, payload ->> 'seedTaskId' as seed_task_id,
            payload ->> 'step' as step, recorded_at
       from events
      where payload ->> 'campaignId' = $1
        and type in ('SeedSelected', 'SynthesisStarted', 'CandidateValidated', 'CandidateRejected')
      order by transaction_id, position`,
    [campaignId],
  );
  const open = new Map<string, SynthesisView>();
  const aliases = new Map<string, string>();
  const done = new Set<string>();
  for (const r of rows) {
    if (r.type === 'SeedSelected' && r.seed_task_id && r.step !== null) {
      // The run's id in either form (a campaign started before ids were made injective keeps its own).
      const id = synthesisId(campaignId, Number(r.step), r.seed_task_id);
      aliases.set(legacySynthesisId(campaignId, Number(r.step), r.seed_task_id), id);
      open.set(id, {
        synthesisId: id,
        seedTaskId: r.seed_task_id,
        step: Number(r.step),
        selectedAt: r.recorded_at.toISOString(),
        startedAt: null,
        runningS: 0,
      });
    } else if (r.type === 'SynthesisStarted' && r.synthesis_id) {
      const s = open.get(aliases.get(r.synthesis_id) ?? r.synthesis_id);
      if (s) {
        s.startedAt = r.recorded_at.toISOString();
        s.synthesisId = r.synthesis_id;
      }
    } else if (r.synthesis_id) done.add(aliases.get(r.synthesis_id) ?? r.synthesis_id);
  }
  return [...open.entries()].filter(([id]) => !done.has(id)).map(([, s]) => s);
}
