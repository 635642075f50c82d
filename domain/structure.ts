// A candidate's structure against its seed's: the method plans a child that exercises the seed's
// skills, so its turns, calls per turn and API classes should look like the seed's. The plan stage
// asks for that; this checks what came out, and a mismatch beyond the tolerance is a named
// rejection reason. The per-turn call cap follows the seed: a seed with a 5-call turn allows a
// 5-call turn in its children (the config's cap alone would forbid what 28% of BFCL seeds do).
// Pure and sandbox-safe.
import type { CandidateTask } from './candidate.js';
import type { SeedCategory } from './task.js';

export interface StructureTolerance {
  /** Most difference in the number of turns with calls. */
  turns: number;
  /** Most difference in the mean number of calls of a turn with calls. */
  meanCallsPerTurn: number;
}

type Shaped = Pick<CandidateTask, 'ground_truth' | 'involved_classes'>;

export interface Structure {
  /** Turns with at least one call. */
  turns: number;
  meanCallsPerTurn: number;
  maxCallsPerTurn: number;
}

export function structureOf(t: Pick<CandidateTask, 'ground_truth'>): Structure {
  const counts = (t.ground_truth ?? []).map((turn) => turn.length).filter((n) => n > 0);
  const total = counts.reduce((a, b) => a + b, 0);
  return {
    turns: counts.length,
    meanCallsPerTurn: counts.length === 0 ? 0 : total / counts.length,
    maxCallsPerTurn: counts.length === 0 ? 0 : Math.max(...counts),
  };
}

/** The per-turn call cap for a seed's children: the config's, or the seed's largest turn if larger. */
export function callsPerTurnCap(configMax: number, seed: Pick<CandidateTask, 'ground_truth'>): number {
  return Math.max(configMax, structureOf(seed).maxCallsPerTurn);
}

/**
 * What differs beyond the tolerance between a candidate's structure and its seed's, or
 * undefined: turns with calls, mean calls per such turn, and API classes (the candidate's must be
 * among the seed's).
 */
export function structureMismatch(
  candidate: Shaped,
  seed: Shaped,
  tol: StructureTolerance,
): string | undefined {
  const c = structureOf(candidate);
  const s = structureOf(seed);
  const problems: string[] = [];
  if (Math.abs(c.turns - s.turns) > tol.turns)
    problems.push(`${c.turns} turns with calls against the seed's ${s.turns} (tolerance ${tol.turns})`);
  if (Math.abs(c.meanCallsPerTurn - s.meanCallsPerTurn) > tol.meanCallsPerTurn + 1e-9)
    problems.push(
      `${c.meanCallsPerTurn.toFixed(2)} calls per turn against the seed's ${s.meanCallsPerTurn.toFixed(2)} (tolerance ${tol.meanCallsPerTurn})`,
    );
  const foreign = candidate.involved_classes.filter((k) => !seed.involved_classes.includes(k));
  if (foreign.length > 0) problems.push(`classes ${foreign.join(', ')} are not among the seed's`);
  return problems.length > 0 ? problems.join('; ') : undefined;
}

/**
 * The BFCL category a generated task's structure gives it (BFCL's own shapes, domain/augment.ts):
 * - miss_func: `missed_function` names arrival turns, each after a holding turn without calls;
 * - miss_param: a turn without calls (the request that lacks a value) followed by one with calls
 *   (the reply that brings it);
 * - otherwise base, or long_context for a task labelled so (BFCL's long context is the
 *   environment's mode for the category, not something the record's shape shows).
 * Plan, execute and rewrite make a child with its seed's turns and calls, not its withheld
 * function or value: that is the Augment stage's work, which builds those shapes itself. So a
 * child of a miss_func or miss_param seed without the shape is labelled base (or long_context),
 * and the quotas count what it is.
 */
export function structuralCategory(
  t: Pick<CandidateTask, 'category' | 'ground_truth'> & { missed_function?: unknown },
): SeedCategory {
  const gt = t.ground_truth ?? [];
  const missed =
    t.missed_function && typeof t.missed_function === 'object' ? Object.keys(t.missed_function) : [];
  const arrivals = missed.map(Number);
  if (
    arrivals.length > 0 &&
    arrivals.every((a) => Number.isInteger(a) && a >= 1 && a < gt.length && gt[a - 1]!.length === 0)
  )
    return 'miss_func';
  if (missed.length === 0 && gt.some((turn, i) => turn.length === 0 && (gt[i + 1]?.length ?? 0) > 0))
    return 'miss_param';
  return t.category === 'long_context' ? 'long_context' : 'base';
}
