// What a training step looked like across bands: counted as groups are applied, summarised
// once the step is closed (StepAggregated). The paper's figure: boundary tasks carry about
// 2.0-2.2x the reward variance of the others.
import { BANDS, type Band } from './band.js';

export interface BandTally {
  /** Groups of the step whose task ended in this band (one group per task per step as a rule). */
  tasks: number;
  /** Sum of those groups' reward variances. */
  varianceSum: number;
}

export type StepTally = { groups: number } & Record<Band, BandTally>;

export function emptyTally(): StepTally {
  return {
    groups: 0,
    hard: { tasks: 0, varianceSum: 0 },
    boundary: { tasks: 0, varianceSum: 0 },
    mastered: { tasks: 0, varianceSum: 0 },
  };
}

export function addToTally(t: StepTally, band: Band, groupVariance: number): StepTally {
  return {
    ...t,
    groups: t.groups + 1,
    [band]: { tasks: t[band].tasks + 1, varianceSum: t[band].varianceSum + groupVariance },
  };
}

export function mergeTallies(a: StepTally, b: StepTally): StepTally {
  const out = emptyTally();
  out.groups = a.groups + b.groups;
  for (const band of BANDS)
    out[band] = {
      tasks: a[band].tasks + b[band].tasks,
      varianceSum: a[band].varianceSum + b[band].varianceSum,
    };
  return out;
}

export function bandSummary(t: BandTally): { tasks: number; meanVariance: number | null } {
  return { tasks: t.tasks, meanVariance: t.tasks > 0 ? t.varianceSum / t.tasks : null };
}

/** Mean variance of boundary groups over that of all other groups (null when either is empty). */
export function boundaryVarianceRatio(t: StepTally): number | null {
  const other = {
    tasks: t.hard.tasks + t.mastered.tasks,
    varianceSum: t.hard.varianceSum + t.mastered.varianceSum,
  };
  if (t.boundary.tasks === 0 || other.tasks === 0) return null;
  const o = other.varianceSum / other.tasks;
  return o > 0 ? t.boundary.varianceSum / t.boundary.tasks / o : null;
}
