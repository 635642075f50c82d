// The lineage model of `rods lineage`: a task's ancestry back to its human seed and its life in
// the pool, folded from event-store events (TaskSeeded, SeedSelected, SynthesisStarted,
// StageCompleted, CandidateValidated, TaskInjected, TaskBandChanged, TaskRetired, PoolPruned).
// It reads what was recorded (a read model for audit); domain/lineage.ts holds the rule that
// assigns a new task its root and depth when it is derived. Renderings are in render/, the
// per-generation summary in stats.ts.
// Pure: no I/O, deterministic (analysis/lineage/store.ts reads the events).

import type { RecordedEvent } from '../../platform/store/events/recorded-event.js';

/** The part of a recorded event the model needs. */
export type LineageEvent = Pick<RecordedEvent, 'eventId' | 'streamId' | 'position' | 'type'> & {
  payload: Record<string, unknown>;
  metadata: Record<string, unknown>;
};

export interface StageRecord {
  stage: string;
  attempt: number;
  model: string | null;
  promptVersionHash: string | null;
  outputHash: string;
}

export interface Derivation {
  synthesisId: string | null;
  candidateId: string;
  /** Parents, seed first. */
  parents: string[];
  rootSeedId: string | null;
  /** Depth of the derived task (1 for a child of a human seed). */
  depth: number;
  /** Training step at which the parent was selected. */
  step: number | null;
  policyVersion: string | null;
  /** The boundary statistics of the parent that triggered the synthesis. */
  triggeringStats: unknown;
  parentPhi: number | null;
  selection: {
    eventId: string;
    step: number;
    phi: number;
    quotaSlot: number;
    stats: unknown;
  } | null;
  generatorModel: string | null;
  /** Every StageCompleted of the synthesis, in stream order. */
  stages: StageRecord[];
  models: Record<string, string>;
  promptVersions: Record<string, string>;
  stageOutputs: Record<string, string>;
  judge: {
    model: string | null;
    verdict: string | null;
    scores: Record<string, number>;
    reasons: string[];
    refined: boolean;
  };
  candidateHash: string | null;
}

export interface BandChange {
  from: string | null;
  to: string;
  step: number;
  stats: unknown;
}

export interface TaskLife {
  seeded: { poolVersion: number; source: string | null } | null;
  injected: { step: number; poolVersion: number } | null;
  bandChanges: BandChange[];
  retired: { rule: string; step: number; poolVersion: number; stats: unknown } | null;
  pruned: { step: number; poolVersion: number; phi: number | null; cap: number | null } | null;
  /** seed | active | queued (validated, not injected) | retired | pruned */
  status: 'active' | 'queued' | 'retired' | 'pruned';
}

export interface LineageNode {
  taskId: string;
  origin: 'seed' | 'generated';
  category: string | null;
  taskHash: string | null;
  depth: number;
  rootSeedId: string;
  life: TaskLife;
  /** Null for a human seed (the end of the chain). */
  derivation: Derivation | null;
  parents: LineageNode[];
  /** Parents that have no record in the campaign (a broken chain; invariant 7 says empty). */
  missingParents: string[];
}

export interface Lineage {
  campaignId: string;
  taskId: string;
  /** True when every chain ends at a human seed. */
  complete: boolean;
  root: LineageNode;
  /**
   * The training steps whose band changes the lives show, from the per-step statistics records
   * (a window of the newest steps, `rods lineage --steps`); null when none were read.
   */
  bandWindow: { from: number; to: number } | null;
}

const num = (v: unknown): number | null => (typeof v === 'number' && Number.isFinite(v) ? v : null);
const str = (v: unknown): string | null => (typeof v === 'string' ? v : null);
const strMap = (v: unknown): Record<string, string> =>
  v && typeof v === 'object' && !Array.isArray(v)
    ? Object.fromEntries(Object.entries(v).filter((e): e is [string, string] => typeof e[1] === 'string'))
    : {};
const numMap = (v: unknown): Record<string, number> =>
  v && typeof v === 'object' && !Array.isArray(v)
    ? Object.fromEntries(Object.entries(v).filter((e): e is [string, number] => typeof e[1] === 'number'))
    : {};

/** The events of one campaign indexed for lineage queries. */
export class LineageIndex {
  readonly seeded = new Map<string, LineageEvent>();
  readonly injected = new Map<string, LineageEvent>();
  /** CandidateValidated by candidate id (the candidate id is the generated task's id). */
  readonly validated = new Map<string, LineageEvent[]>();
  readonly selections = new Map<string, LineageEvent>();
  readonly started = new Map<string, LineageEvent>();
  readonly stages = new Map<string, LineageEvent[]>();
  readonly retired = new Map<string, LineageEvent>();
  readonly pruned = new Map<string, { event: LineageEvent; phi: number | null }>();
  readonly bandChanges = new Map<string, BandChange[]>();
  /**
   * The steps whose per-step statistics records the band changes were read from (null: none were
   * read); TaskBandChanged events of campaigns recorded before are all read.
   */
  bandWindow: { from: number; to: number } | null = null;

  constructor(
    readonly campaignId: string,
    events: Iterable<LineageEvent>,
  ) {
    const push = <T>(m: Map<string, T[]>, k: string, v: T) => {
      const l = m.get(k);
      if (l) l.push(v);
      else m.set(k, [v]);
    };
    for (const e of events) {
      const p = e.payload;
      if (p.campaignId !== undefined && p.campaignId !== campaignId) continue;
      switch (e.type) {
        case 'TaskSeeded':
          if (!this.seeded.has(String(p.taskId))) this.seeded.set(String(p.taskId), e);
          break;
        case 'TaskInjected':
          if (!this.injected.has(String(p.taskId))) this.injected.set(String(p.taskId), e);
          break;
        case 'CandidateValidated':
          push(this.validated, String(p.candidateId), e);
          break;
        case 'SeedSelected':
          this.selections.set(e.eventId, e);
          break;
        case 'SynthesisStarted':
          this.started.set(String(p.synthesisId), e);
          break;
        case 'StageCompleted':
          push(this.stages, String(p.synthesisId), e);
          break;
        case 'TaskRetired':
          if (!this.retired.has(String(p.taskId))) this.retired.set(String(p.taskId), e);
          break;
        case 'PoolPruned':
          for (const x of (p.pruned as { taskId: string; phi?: number }[] | undefined) ?? [])
            if (!this.pruned.has(x.taskId)) this.pruned.set(x.taskId, { event: e, phi: num(x.phi) });
          break;
        case 'TaskBandChanged':
          push(this.bandChanges, String(p.taskId), {
            from: str(p.from),
            to: String(p.to),
            step: num(p.step) ?? 0,
            stats: p.stats ?? null,
          });
          break;
        default:
          break;
      }
    }
  }

  /** Band changes read from the per-step statistics records of the steps in `window`. */
  addBandChanges(changes: Iterable<BandChange & { taskId: string }>, window: { from: number; to: number }) {
    for (const { taskId, ...c } of changes) {
      const l = this.bandChanges.get(taskId);
      if (l) l.push(c);
      else this.bandChanges.set(taskId, [c]);
    }
    this.bandWindow = window;
  }

  /** Whether the campaign has any record of this task (seeded, injected or a validated candidate). */
  knows(taskId: string): boolean {
    return this.seeded.has(taskId) || this.injected.has(taskId) || this.validated.has(taskId);
  }

  /** All pool tasks (seeded or injected) in event order. */
  poolTasks(): string[] {
    return [...this.seeded.keys(), ...this.injected.keys()];
  }

  /** The validated candidate a task came from (matching the injected content hash when several). */
  validatedFor(taskId: string): LineageEvent | undefined {
    const list = this.validated.get(taskId);
    if (!list || list.length === 0) return undefined;
    const hash = this.injected.get(taskId)?.payload.taskHash;
    return list.find((e) => e.payload.candidateHash === hash) ?? list[list.length - 1];
  }

  /** Parents of a generated task, seed first ([] for a seed or an unknown task). */
  parentsOf(taskId: string): string[] {
    if (this.seeded.has(taskId)) return [];
    const inj = this.injected.get(taskId)?.payload.parents;
    if (Array.isArray(inj) && inj.length > 0) return inj.map(String);
    const v = this.validatedFor(taskId);
    const lp = (v?.metadata.lineage as { parents?: unknown } | undefined)?.parents;
    if (Array.isArray(lp) && lp.length > 0) return lp.map(String);
    const seed = v?.payload.seedTaskId;
    return typeof seed === 'string' ? [seed] : [];
  }

  life(taskId: string): TaskLife {
    const s = this.seeded.get(taskId)?.payload;
    const i = this.injected.get(taskId)?.payload;
    const r = this.retired.get(taskId)?.payload;
    const pr = this.pruned.get(taskId);
    const life: TaskLife = {
      seeded: s ? { poolVersion: num(s.poolVersion) ?? 0, source: str(s.source) } : null,
      injected: i ? { step: num(i.step) ?? 0, poolVersion: num(i.poolVersion) ?? 0 } : null,
      bandChanges: [...(this.bandChanges.get(taskId) ?? [])],
      retired: r
        ? {
            rule: String(r.rule),
            step: num(r.step) ?? 0,
            poolVersion: num(r.poolVersion) ?? 0,
            stats: r.stats ?? null,
          }
        : null,
      pruned: pr
        ? {
            step: num(pr.event.payload.step) ?? 0,
            poolVersion: num(pr.event.payload.poolVersion) ?? 0,
            phi: pr.phi,
            cap: num(pr.event.payload.cap),
          }
        : null,
      status: 'active',
    };
    life.bandChanges.sort((a, b) => a.step - b.step);
    if (life.retired) life.status = 'retired';
    else if (life.pruned) life.status = 'pruned';
    else if (!life.seeded && !life.injected) life.status = 'queued';
    return life;
  }

  derivation(taskId: string): Derivation | null {
    if (this.seeded.has(taskId)) return null;
    const v = this.validatedFor(taskId);
    const lin = (v?.metadata.lineage ?? {}) as Record<string, unknown>;
    const synthesisId = str(v?.payload.synthesisId) ?? str(lin.synthesisId);
    const started = synthesisId ? this.started.get(synthesisId) : undefined;
    const selectionId = str(lin.selectionEventId) ?? str(started?.payload.selectionEventId);
    const sel = selectionId ? this.selections.get(selectionId)?.payload : undefined;
    const stages = (synthesisId ? (this.stages.get(synthesisId) ?? []) : []).map((e) => ({
      stage: String(e.payload.stage),
      attempt: num(e.payload.attempt) ?? 0,
      model: str(e.payload.model),
      promptVersionHash: str(e.payload.promptVersionHash),
      outputHash: String(e.payload.outputHash),
    }));
    const parents = this.parentsOf(taskId);
    return {
      synthesisId,
      candidateId: str(v?.payload.candidateId) ?? taskId,
      parents,
      rootSeedId: str(lin.rootSeedId),
      depth: (num(lin.depth) ?? 0) + 1,
      step: num(lin.step) ?? num(sel?.step),
      policyVersion: str(lin.policyVersion),
      triggeringStats: lin.triggeringStats ?? sel?.stats ?? null,
      parentPhi: num(lin.parentPhi) ?? num(sel?.phi),
      selection:
        sel && selectionId
          ? {
              eventId: selectionId,
              step: num(sel.step) ?? 0,
              phi: num(sel.phi) ?? 0,
              quotaSlot: num(sel.quotaSlot) ?? 0,
              stats: sel.stats ?? null,
            }
          : null,
      generatorModel: str(started?.payload.generatorModel),
      stages,
      models: strMap(lin.models),
      promptVersions: strMap(lin.promptVersions),
      stageOutputs: strMap(lin.stageOutputs),
      judge: {
        model: str(v?.payload.judgeModel),
        verdict: str(lin.judgeVerdict),
        scores: numMap(v?.payload.judgeScores ?? lin.judgeScores),
        reasons: Array.isArray(lin.judgeReasons) ? lin.judgeReasons.map(String) : [],
        refined: v?.payload.refined === true,
      },
      candidateHash: str(v?.payload.candidateHash),
    };
  }

  /** The lineage tree of a task; undefined when the campaign has no record of it. */
  lineage(taskId: string): Lineage | undefined {
    if (!this.knows(taskId)) return undefined;
    let complete = true;
    const build = (id: string, seen: Set<string>): LineageNode => {
      const seed = this.seeded.get(id);
      const inj = this.injected.get(id)?.payload;
      const v = this.validatedFor(id)?.payload;
      const parentIds = this.parentsOf(id);
      const parents: LineageNode[] = [];
      const missing: string[] = [];
      const inner = new Set(seen).add(id);
      for (const p of parentIds) {
        if (inner.has(p) || !this.knows(p)) {
          missing.push(p);
          complete = false;
        } else parents.push(build(p, inner));
      }
      if (!seed && parentIds.length === 0) complete = false;
      const first = parents[0];
      return {
        taskId: id,
        origin: seed ? 'seed' : 'generated',
        category: str(seed?.payload.category) ?? str(inj?.category) ?? str(v?.category),
        taskHash: str(seed?.payload.taskHash) ?? str(inj?.taskHash) ?? str(v?.candidateHash),
        depth: seed ? 0 : Math.max(0, ...parents.map((p) => p.depth)) + 1,
        rootSeedId: seed ? id : (first?.rootSeedId ?? parentIds[0] ?? id),
        life: this.life(id),
        derivation: this.derivation(id),
        parents,
        missingParents: missing,
      };
    };
    const root = build(taskId, new Set());
    return { campaignId: this.campaignId, taskId, complete, root, bandWindow: this.bandWindow };
  }

  /** Depth of every pool task (seed 0; a generated task one more than its deepest known parent). */
  depths(): Map<string, number> {
    const out = new Map<string, number>();
    const depthOf = (id: string, stack: Set<string>): number => {
      const known = out.get(id);
      if (known !== undefined) return known;
      if (this.seeded.has(id)) {
        out.set(id, 0);
        return 0;
      }
      stack.add(id);
      let d = 0;
      for (const p of this.parentsOf(id))
        if (!stack.has(p) && this.knows(p)) d = Math.max(d, depthOf(p, stack));
      stack.delete(id);
      out.set(id, d + 1);
      return d + 1;
    };
    for (const id of this.poolTasks()) depthOf(id, new Set());
    return out;
  }
}
