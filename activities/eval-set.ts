// The evaluation set a campaign's candidates are checked against for contamination
// (domain/contamination.ts): the BFCL multi-turn tasks of every category past the campaign's
// seeds, as the executor reads them from the pinned bfcl-eval. Fetched and fingerprinted once per
// process, per executor, seed count and n-gram size (about 1.8 MB of JSON for 800 tasks); a
// failed fetch is not kept, so the next call asks again.
import { type EvalTask, fingerprint } from '../domain/contamination.js';
import { SEED_CATEGORIES } from '../domain/task.js';
import type { ExecutorClient } from './executor-client.js';

// More than any BFCL multi-turn category holds (200 each in bfcl-eval 2026.3.23).
const ALL = 100_000;

const loaded = new Map<string, Promise<EvalTask[]>>();

/** Evaluation tasks: those of each category from index `perCategory` on (the first are the seeds). */
export function evaluationSet(
  executor: ExecutorClient,
  perCategory: number,
  ngram: number,
): Promise<EvalTask[]> {
  const key = `${executor.url}\u0000${perCategory}\u0000${ngram}`;
  let tasks = loaded.get(key);
  if (!tasks) {
    tasks = (async () => {
      const out: EvalTask[] = [];
      for (const category of SEED_CATEGORIES)
        for (const t of await executor.seeds(category, ALL, perCategory))
          out.push({ id: t.id, fingerprint: fingerprint(t, ngram) });
      return out;
    })();
    loaded.set(key, tasks);
    tasks.catch(() => loaded.delete(key));
  }
  return tasks;
}
