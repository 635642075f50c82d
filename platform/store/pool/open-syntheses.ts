// The synthesis runs in flight (open_syntheses, migration 0021): a run enters with its seed's
// selection, is marked started with its SynthesisStarted and leaves with its outcome, in the
// transaction that appends each event (the pool projection calls recordOpenSynthesis; replay too).
// A status call reads the rows of one campaign: as many as runs in flight, however old it is.
import type pg from 'pg';
import { legacySynthesisId, synthesisId } from '../../../domain/ids.js';
import type { SeedSelected, SynthesisStarted } from '../../../schemas/types.generated.js';
import type { Queryable } from '../events/event-store.js';

export async function recordOpenSynthesis(c: pg.ClientBase, type: string, payload: unknown): Promise<void> {
  switch (type) {
    case 'SeedSelected': {
      const p = payload as SeedSelected;
      await c.query(
        `insert into open_syntheses (campaign_id, synthesis_id, legacy_id, seed_task_id, step, selected_at)
         values ($1, $2, $3, $4, $5, now()) on conflict do nothing`,
        [
          p.campaignId,
          synthesisId(p.campaignId, p.step, p.seedTaskId),
          legacySynthesisId(p.campaignId, p.step, p.seedTaskId),
          p.seedTaskId,
          p.step,
        ],
      );
      return;
    }
    case 'SynthesisStarted': {
      const p = payload as SynthesisStarted;
      await c.query(
        `update open_syntheses set started_at = now(), synthesis_id = $2
          where campaign_id = $1 and (synthesis_id = $2 or legacy_id = $2)`,
        [p.campaignId, p.synthesisId],
      );
      return;
    }
    case 'CandidateValidated':
    case 'CandidateRejected': {
      // An Augment variant's outcome names an id of its own, which no run has: it removes nothing.
      const p = payload as { campaignId: string; synthesisId: string };
      await c.query(
        'delete from open_syntheses where campaign_id = $1 and (synthesis_id = $2 or legacy_id = $2)',
        [p.campaignId, p.synthesisId],
      );
      return;
    }
    default:
      return;
  }
}

export interface OpenSynthesisRow {
  synthesisId: string;
  seedTaskId: string;
  step: number;
  selectedAt: Date;
  startedAt: Date | null;
}

/** The campaign's runs without an outcome, oldest selection (then step and seed) first. */
export async function openSyntheses(db: Queryable, campaignId: string): Promise<OpenSynthesisRow[]> {
  const { rows } = await db.query<OpenSynthesisRow & { step: string }>(
    `select synthesis_id as "synthesisId", seed_task_id as "seedTaskId", step::text as step,
            selected_at as "selectedAt", started_at as "startedAt"
       from open_syntheses where campaign_id = $1 order by selected_at, step, seed_task_id`,
    [campaignId],
  );
  return rows.map((r) => ({ ...r, step: Number(r.step) }));
}
