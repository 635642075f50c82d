// Reads of the candidates table: the validated candidates planning injects from, the exact
// duplicate check of a new candidate, and every candidate of a campaign (what-if).
import type pg from 'pg';
import type { ValidatedCandidate } from '../../../domain/step-events.js';
import type { Queryable } from '../events/event-store.js';
import { lockForTransaction } from '../locks.js';

/** The campaign's validated candidates not injected yet, oldest first. */
export async function validatedCandidates(db: Queryable, campaignId: string): Promise<ValidatedCandidate[]> {
  const { rows } = await db.query<ValidatedCandidate>(
    `select candidate_id, candidate_hash, seed_task_id, candidate, lineage from candidates
      where campaign_id = $1 and status = 'validated' order by created_at, candidate_id`,
    [campaignId],
  );
  return rows;
}

/** The campaign's candidates with these ids, whatever their status. */
export async function candidatesByIds(
  db: Queryable,
  campaignId: string,
  ids: readonly string[],
): Promise<Omit<ValidatedCandidate, 'candidate_hash'>[]> {
  if (ids.length === 0) return [];
  const { rows } = await db.query<Omit<ValidatedCandidate, 'candidate_hash'>>(
    'select candidate_id, seed_task_id, candidate, lineage from candidates where campaign_id = $1 and candidate_id = any($2::text[])',
    [campaignId, ids],
  );
  return rows;
}

/** Another candidate of the campaign with this content hash, if any (under the candidates lock). */
export async function candidateWithHash(
  db: pg.PoolClient,
  campaignId: string,
  hash: string,
  exceptId: string,
): Promise<string | undefined> {
  await lockForTransaction(db, `rods-candidates:${campaignId}`);
  const { rows } = await db.query<{ candidate_id: string }>(
    'select candidate_id from candidates where campaign_id = $1 and candidate_hash = $2 and candidate_id <> $3',
    [campaignId, hash, exceptId],
  );
  return rows[0]?.candidate_id;
}

/**
 * What a new candidate is compared with for near duplicates: the campaign's seeds and its
 * candidates not rejected, except the candidate itself and (for an Augment variant) its base and
 * the base's other variants. Seeds first, then candidates, each by id.
 */
export async function knownTaskIds(
  db: Queryable,
  campaignId: string,
  candidateId: string,
  derivedFrom: string | undefined,
): Promise<{ kind: 'seed' | 'candidate'; id: string }[]> {
  const { rows } = await db.query<{ kind: 'seed' | 'candidate'; id: string }>(
    `select 'seed' as kind, task_id as id from pool_members where campaign_id = $1 and origin = 'seed'
     union all
     select 'candidate', candidate_id from candidates
      where campaign_id = $1 and status <> 'rejected' and candidate_id <> $2
        and ($3::text is null or (candidate_id <> $3 and left(candidate_id, length($3) + 1) <> $3 || '~'))
     order by kind desc, id`,
    [campaignId, candidateId, derivedFrom ?? null],
  );
  return rows;
}

/** The question and ground truth of these seeds and candidates (a task's initial_config can be most of its size). */
export async function knownTaskTexts(
  db: Queryable,
  campaignId: string,
  ids: { seed: readonly string[]; candidate: readonly string[] },
): Promise<
  { kind: 'seed' | 'candidate'; id: string; task: { question?: unknown; ground_truth?: unknown } }[]
> {
  const { rows } = await db.query<{
    kind: 'seed' | 'candidate';
    id: string;
    task: { question?: unknown; ground_truth?: unknown };
  }>(
    `select 'seed' as kind, task_id as id,
            jsonb_build_object('question', task->'question', 'ground_truth', task->'ground_truth') as task
       from pool_members where campaign_id = $1 and origin = 'seed' and task_id = any($2::text[])
     union all
     select 'candidate', candidate_id,
            jsonb_build_object('question', candidate->'question', 'ground_truth', candidate->'ground_truth')
       from candidates where campaign_id = $1 and candidate_id = any($3::text[])`,
    [campaignId, ids.seed, ids.candidate],
  );
  return rows;
}

/** Each candidate's status (validated, injected, rejected, ...). */
export async function candidateStatuses(db: Queryable, campaignId: string): Promise<Map<string, string>> {
  const { rows } = await db.query<{ candidate_id: string; status: string }>(
    'select candidate_id, status from candidates where campaign_id = $1',
    [campaignId],
  );
  return new Map(rows.map((r) => [r.candidate_id, r.status]));
}
