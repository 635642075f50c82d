// The seeds and earlier candidates a new candidate is compared with for near-duplicates, with
// their features (domain/near-duplicate.ts). A seed's or candidate's question and ground truth
// never change once stored (only a candidate's status does), so each process keeps the features
// it computed, keyed by campaign, kind and id: an outcome then reads the ids of the campaign's
// tasks and only the contents it has not seen, instead of every question and ground truth of a
// campaign that grows by thousands of candidates over weeks.
import type pg from 'pg';
import { type TaskFeatures, taskFeatures } from '../domain/near-duplicate.js';
import type { Candidate } from './llm/schemas.js';

export interface KnownTask {
  kind: 'seed' | 'candidate';
  id: string;
  features: TaskFeatures;
}

/** Features by `campaign \0 kind \0 id`, the oldest dropped beyond `max` (a Map keeps insertion order). */
export class FeatureCache {
  private readonly byKey = new Map<string, TaskFeatures>();
  hits = 0;
  misses = 0;

  constructor(private readonly max = 200_000) {}

  static key(campaignId: string, kind: KnownTask['kind'], id: string): string {
    return `${campaignId}\u0000${kind}\u0000${id}`;
  }

  get(key: string): TaskFeatures | undefined {
    const f = this.byKey.get(key);
    if (f) this.hits++;
    else this.misses++;
    return f;
  }

  set(key: string, features: TaskFeatures): void {
    this.byKey.set(key, features);
    if (this.byKey.size > this.max) this.byKey.delete(this.byKey.keys().next().value!);
  }

  get size(): number {
    return this.byKey.size;
  }
}

const processCache = new FeatureCache();

/**
 * The campaign's seeds and its candidates that are not rejected, other than the candidate itself
 * and (for an Augment variant) its base and the base's other variants.
 */
export async function knownTasks(
  c: pg.PoolClient,
  campaignId: string,
  candidateId: string,
  derivedFrom: string | undefined,
  cache: FeatureCache = processCache,
): Promise<KnownTask[]> {
  const { rows } = await c.query<{ kind: KnownTask['kind']; id: string }>(
    `select 'seed' as kind, task_id as id from pool_members where campaign_id = $1 and origin = 'seed'
     union all
     select 'candidate', candidate_id from candidates
      where campaign_id = $1 and status <> 'rejected' and candidate_id <> $2
        and ($3::text is null or (candidate_id <> $3 and left(candidate_id, length($3) + 1) <> $3 || '~'))
     order by kind desc, id`,
    [campaignId, candidateId, derivedFrom ?? null],
  );
  const key = (r: { kind: KnownTask['kind']; id: string }) => FeatureCache.key(campaignId, r.kind, r.id);
  const features = new Map<string, TaskFeatures>();
  const missing = { seed: [] as string[], candidate: [] as string[] };
  for (const r of rows) {
    const f = cache.get(key(r));
    if (f) features.set(key(r), f);
    else missing[r.kind].push(r.id);
  }
  if (missing.seed.length + missing.candidate.length > 0) {
    // Only the two fields the features use: a task's initial_config can be most of its size.
    const fetched = await c.query<{ kind: KnownTask['kind']; id: string; task: Candidate }>(
      `select 'seed' as kind, task_id as id,
              jsonb_build_object('question', task->'question', 'ground_truth', task->'ground_truth') as task
         from pool_members where campaign_id = $1 and origin = 'seed' and task_id = any($2::text[])
       union all
       select 'candidate', candidate_id,
              jsonb_build_object('question', candidate->'question', 'ground_truth', candidate->'ground_truth')
         from candidates where campaign_id = $1 and candidate_id = any($3::text[])`,
      [campaignId, missing.seed, missing.candidate],
    );
    for (const r of fetched.rows) {
      const f = taskFeatures(r.task);
      cache.set(key(r), f);
      features.set(key(r), f);
    }
  }
  // Seeds, then candidates, each by id: the nearest of equals is the first, on every run.
  const out: KnownTask[] = [];
  for (const r of rows) {
    const f = features.get(key(r));
    if (f) out.push({ kind: r.kind, id: r.id, features: f });
  }
  return out;
}
