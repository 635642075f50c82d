// The seeds and earlier candidates a new candidate is compared with for near-duplicates, with
// their features (domain/near-duplicate.ts). A seed's or candidate's question and ground truth
// never change once stored (only a candidate's status does), so each process keeps the features
// it computed, keyed by campaign, kind and id: an outcome then reads the ids of the campaign's
// tasks and only the contents it has not seen, instead of every question and ground truth of a
// campaign that grows by thousands of candidates over weeks.
import type pg from 'pg';
import { type TaskFeatures, taskFeatures } from '../domain/near-duplicate.js';
import { knownTaskIds, knownTaskTexts } from '../platform/store/pool/candidates.js';
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
  const rows = await knownTaskIds(c, campaignId, candidateId, derivedFrom);
  const key = (r: { kind: KnownTask['kind']; id: string }) => FeatureCache.key(campaignId, r.kind, r.id);
  const features = new Map<string, TaskFeatures>();
  const missing = { seed: [] as string[], candidate: [] as string[] };
  for (const r of rows) {
    const f = cache.get(key(r));
    if (f) features.set(key(r), f);
    else missing[r.kind].push(r.id);
  }
  if (missing.seed.length + missing.candidate.length > 0) {
    for (const r of await knownTaskTexts(c, campaignId, missing)) {
      const f = taskFeatures(r.task as Candidate);
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
