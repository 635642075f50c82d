// Per-task reward statistics, one reward group at a time: all-rollout moments, the latest
// group, an EWMA of group means, a bounded window of recent group means, the detector signal,
// φ and the band. Pure: the aggregator, replay and what-if call the same function.

import type { TaskStatsColumns } from '../schemas/types.generated.js';
import { type Band, bandOf, type DetectorConfig, phi } from './band.js';
import { EMPTY_MOMENTS, type Moments, mergeMoments, momentsOf, populationVariance } from './moments.js';

export interface TaskState {
  groups: number;
  /** Moments of every rollout reward seen (Welford within a group, Chan across groups). */
  moments: Moments;
  latestMean: number;
  latestVariance: number;
  ewma: number;
  /** Most recent group means, oldest first; as long as the detector's window needs. */
  recentMeans: number[];
  lastStep: number;
  /** The statistic the detector read (latest mean, EWMA or window mean). */
  signal: number;
  phi: number;
  band: Band;
}

export interface GroupApplied {
  state: TaskState;
  /** Set when the band differs from the previous state's (from is null for a first observation). */
  bandChange: { from: Band | null; to: Band } | null;
  /** The group's own moments (mean and population variance of its rewards). */
  group: { mean: number; variance: number; n: number };
}

function ewmaAlpha(cfg: DetectorConfig): number {
  return cfg.window.kind === 'ewma' ? cfg.window.alpha : cfg.ewmaAlpha;
}

function keep(cfg: DetectorConfig): number {
  return cfg.window.kind === 'last' ? cfg.window.k : 1;
}

function signalOf(cfg: DetectorConfig, latest: number, ewma: number, recent: number[]): number {
  switch (cfg.window.kind) {
    case 'latest':
      return latest;
    case 'ewma':
      return ewma;
    case 'last':
      return recent.reduce((a, b) => a + b, 0) / recent.length;
  }
}

/** The last `k` of `xs` followed by `x` (as `[...xs, x].slice(-k)`, without the copy in between). */
function appendKept(xs: readonly number[] | undefined, x: number, k: number): number[] {
  const len = xs?.length ?? 0;
  const from = Math.max(0, len + 1 - k);
  const out = new Array<number>(len + 1 - from);
  for (let i = from; i < len; i++) out[i - from] = xs![i]!;
  out[len - from] = x;
  return out;
}

/**
 * Folds one validated reward group (non-empty, finite, in [0,1]) into a task's state. With
 * `lateGroups: 'fold'`, a group older than the task's last step (published late) joins the
 * all-rollout moments and the group count only: the latest group, the EWMA, the window, the
 * signal and the band stay those of the newer groups, since a late group says nothing about the
 * policy now.
 */
export function applyGroup(
  prev: TaskState | undefined,
  rewards: readonly number[],
  step: number,
  cfg: DetectorConfig,
  lateGroups: 'fold' | 'reject-stale' = 'reject-stale',
): GroupApplied {
  const g = momentsOf(rewards);
  const groupVariance = populationVariance(g);
  if (lateGroups === 'fold' && prev && step < prev.lastStep) {
    return {
      state: { ...prev, groups: prev.groups + 1, moments: mergeMoments(prev.moments, g) },
      bandChange: null,
      group: { mean: g.mean, variance: groupVariance, n: g.n },
    };
  }
  const alpha = ewmaAlpha(cfg);
  const ewma = prev ? alpha * g.mean + (1 - alpha) * prev.ewma : g.mean;
  const recentMeans = appendKept(prev?.recentMeans, g.mean, keep(cfg));
  const signal = signalOf(cfg, g.mean, ewma, recentMeans);
  const band = bandOf(signal, cfg);
  const state: TaskState = {
    groups: (prev?.groups ?? 0) + 1,
    moments: mergeMoments(prev?.moments ?? EMPTY_MOMENTS, g),
    latestMean: g.mean,
    latestVariance: groupVariance,
    ewma,
    recentMeans,
    lastStep: Math.max(prev?.lastStep ?? step, step),
    signal,
    phi: phi(signal),
    band,
  };
  const bandChange = !prev || prev.band !== band ? { from: prev?.band ?? null, to: band } : null;
  return { state, bandChange, group: { mean: g.mean, variance: groupVariance, n: g.n } };
}

/**
 * A task's entry in a step's statistics record (StepStatsRecorded): what the state store keeps,
 * less what derives from it (variance, phi) and the detector's window.
 */
export interface StepStatsEntry {
  taskId: string;
  groupCount: number;
  count: number;
  mean: number;
  m2: number;
  latestGroupMean: number;
  latestGroupVariance: number;
  ewma: number;
  signal: number;
  band: Band;
  bandBefore: Band | null;
  lastStep: number;
}

const COLUMNS = [
  'taskId',
  'groupCount',
  'count',
  'mean',
  'm2',
  'latestGroupMean',
  'latestGroupVariance',
  'ewma',
  'signal',
  'band',
  'bandBefore',
  'lastStep',
] as const satisfies readonly (keyof StepStatsEntry & keyof TaskStatsColumns)[];

/** The tasks' states after a step, with their bands before it, as the record's parallel columns. */
export function stepStatsColumns(
  tasks: readonly { taskId: string; state: TaskState; bandBefore: Band | null }[],
): TaskStatsColumns {
  // Filled column by column from the states: no entry object per task on the aggregator's path.
  const col = <T>(f: (t: (typeof tasks)[number]) => T): T[] => tasks.map(f);
  return {
    taskId: col((t) => t.taskId),
    groupCount: col((t) => t.state.groups),
    count: col((t) => t.state.moments.n),
    mean: col((t) => t.state.moments.mean),
    m2: col((t) => t.state.moments.m2),
    latestGroupMean: col((t) => t.state.latestMean),
    latestGroupVariance: col((t) => t.state.latestVariance),
    ewma: col((t) => t.state.ewma),
    signal: col((t) => t.state.signal),
    band: col((t) => t.state.band),
    bandBefore: col((t) => t.bandBefore),
    lastStep: col((t) => t.state.lastStep),
  };
}

export class StepStatsColumnsError extends Error {
  override name = 'StepStatsColumnsError';
}

/**
 * The record's columns back as one entry per task. Columns of unequal length are not a record the
 * aggregator writes: refused, not read as far as the shortest.
 */
export function stepStatsEntries(cols: TaskStatsColumns): StepStatsEntry[] {
  const n = cols.taskId.length;
  for (const c of COLUMNS)
    if (!Array.isArray(cols[c]) || cols[c].length !== n)
      throw new StepStatsColumnsError(
        `statistics column ${c} has ${Array.isArray(cols[c]) ? cols[c].length : 'no'} entries for ${n} tasks`,
      );
  const out = new Array<StepStatsEntry>(n);
  for (let i = 0; i < n; i++) {
    const e = {} as Record<string, unknown>;
    for (const c of COLUMNS) e[c] = cols[c][i];
    out[i] = e as unknown as StepStatsEntry;
  }
  return out;
}

/** A step record's entry as the TaskStats record (variance and phi derived as statsRecord derives them). */
export function statsOfStepEntry(e: StepStatsEntry) {
  return {
    groupCount: e.groupCount,
    count: e.count,
    mean: e.mean,
    m2: e.m2,
    variance: populationVariance({ n: e.count, mean: e.mean, m2: e.m2 }),
    latestGroupMean: e.latestGroupMean,
    latestGroupVariance: e.latestGroupVariance,
    ewma: e.ewma,
    signal: e.signal,
    phi: phi(e.signal),
    band: e.band,
    lastStep: e.lastStep,
  };
}

/** The TaskStats record of the event schemas (TaskRetired, SeedSelected, ...). */
export function statsRecord(s: TaskState) {
  return {
    groupCount: s.groups,
    count: s.moments.n,
    mean: s.moments.mean,
    m2: s.moments.m2,
    variance: populationVariance(s.moments),
    latestGroupMean: s.latestMean,
    latestGroupVariance: s.latestVariance,
    ewma: s.ewma,
    signal: s.signal,
    phi: s.phi,
    band: s.band,
    lastStep: s.lastStep,
  };
}
