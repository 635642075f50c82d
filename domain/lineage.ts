// The lineage model: every task traces to a human seed. A human seed is its own root at depth 0;
// a derived task's parents are listed seed first (the boundary task it was synthesized from),
// its root is that first parent's root and its depth is one more than its deepest parent's.
// Pure: no I/O, deterministic.

export interface Lineage {
  /** Id of the human seed at the root of the task's lineage. */
  rootSeedId: string;
  /** Generations from the root: 0 for a human seed. */
  depth: number;
}

export class LineageError extends Error {
  override name = 'LineageError';
}

/** The lineage of a human seed: its own root at depth 0. */
export function seedLineage(taskId: string): Lineage {
  return { rootSeedId: taskId, depth: 0 };
}

/**
 * The lineage of a task derived from `parents` (seed first). `lineageOf` gives the lineage of a
 * known task (a pool member, or a retired task from the lineage projection). The first parent
 * must be known (it names the root); other parents that are unknown do not count towards the
 * depth. Throws LineageError when parents is empty, has duplicates or its first parent is unknown.
 */
export function childLineage(
  parents: readonly string[],
  lineageOf: (taskId: string) => Lineage | undefined,
): Lineage {
  const first = parents[0];
  if (first === undefined)
    throw new LineageError('a derived task needs at least one parent (its seed first)');
  if (new Set(parents).size !== parents.length) {
    throw new LineageError(`parents ${JSON.stringify(parents)} list a task twice`);
  }
  const seed = lineageOf(first);
  if (!seed) {
    throw new LineageError(
      `the first parent ${JSON.stringify(first)} has no known lineage; a derived task's seed must be a known task`,
    );
  }
  let depth = seed.depth;
  for (const p of parents.slice(1)) {
    const l = lineageOf(p);
    if (l && l.depth > depth) depth = l.depth;
  }
  return { rootSeedId: seed.rootSeedId, depth: depth + 1 };
}
