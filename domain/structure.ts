// A candidate's structure against its seed's: the method plans a child that exercises the seed's
// skills, so its turns, calls per turn and API classes should look like the seed's. The plan stage
// asks for that; this checks what came out, and a mismatch beyond the tolerance is a named
// rejection reason. The per-turn call cap follows the seed: a seed with a 5-call turn allows a
// 5-call turn in its children (the config's cap alone would forbid what 28% of BFCL seeds do).
// Pure and sandbox-safe.
import type { CandidateTask } from './candidate.js';

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
