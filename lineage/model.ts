// The lineage model of `rods lineage`: a task's ancestry back to its human seed and its life in
// the pool, folded from event-store events (TaskSeeded, SeedSelected, SynthesisStarted,
// StageCompleted, CandidateValidated, TaskInjected, TaskBandChanged, TaskRetired, PoolPruned),
// and the renderings (tree, json, dot, mermaid) and per-generation statistics.
// Pure: no I/O, deterministic (lineage/store.ts reads the events).

/** The part of a recorded event the model needs. */
export interface LineageEvent {
  eventId: string;
  streamId: string;
  position: number;
  type: string;
  payload: Record<string, unknown>;
  metadata: Record<string, unknown>;
}

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
  readonly bandChanges = new Map<string, LineageEvent[]>();

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
          push(this.bandChanges, String(p.taskId), e);
          break;
        default:
          break;
      }
    }
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
      bandChanges: (this.bandChanges.get(taskId) ?? []).map((e) => ({
        from: str(e.payload.from),
        to: String(e.payload.to),
        step: num(e.payload.step) ?? 0,
        stats: e.payload.stats ?? null,
      })),
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
    return { campaignId: this.campaignId, taskId, complete, root };
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

export interface GenerationStats {
  depth: number;
  tasks: number;
  injected: number;
  active: number;
  retired: number;
  pruned: number;
  /** Tasks of this generation that have at least one child in the pool. */
  parents: number;
  /** Pool tasks whose first parent is in this generation. */
  children: number;
  /** Children per parent (over the tasks of this generation that have children); 0 when none. */
  meanBranching: number;
  /** Share of this generation still in the pool. */
  survivalShare: number;
}

export interface LineageStats {
  campaignId: string;
  tasks: number;
  generations: GenerationStats[];
}

/** Per-generation summary of a campaign's pool tasks (seeded and injected). */
export function lineageStats(index: LineageIndex): LineageStats {
  const depths = index.depths();
  const byDepth = new Map<number, GenerationStats>();
  const gen = (d: number): GenerationStats => {
    let g = byDepth.get(d);
    if (!g) {
      g = {
        depth: d,
        tasks: 0,
        injected: 0,
        active: 0,
        retired: 0,
        pruned: 0,
        parents: 0,
        children: 0,
        meanBranching: 0,
        survivalShare: 0,
      };
      byDepth.set(d, g);
    }
    return g;
  };
  const childCount = new Map<string, number>();
  for (const id of index.injected.keys()) {
    const p = index.parentsOf(id)[0];
    if (p !== undefined && depths.has(p)) childCount.set(p, (childCount.get(p) ?? 0) + 1);
  }
  for (const [id, d] of depths) {
    const g = gen(d);
    g.tasks++;
    if (index.injected.has(id)) g.injected++;
    const life = index.life(id);
    if (life.status === 'retired') g.retired++;
    else if (life.status === 'pruned') g.pruned++;
    else g.active++;
    const c = childCount.get(id) ?? 0;
    if (c > 0) {
      g.parents++;
      g.children += c;
    }
  }
  const generations = [...byDepth.values()].sort((a, b) => a.depth - b.depth);
  for (const g of generations) {
    g.meanBranching = g.parents > 0 ? g.children / g.parents : 0;
    g.survivalShare = g.tasks > 0 ? g.active / g.tasks : 0;
  }
  return { campaignId: index.campaignId, tasks: depths.size, generations };
}

// ---------------------------------------------------------------------------------------------
// Renderings

const short = (h: string | null | undefined, n = 12) => (h ? h.slice(0, n) : '-');
const fmt = (v: unknown) => (typeof v === 'number' ? String(Math.round(v * 1000) / 1000) : String(v));

function statsLine(stats: unknown): string {
  if (!stats || typeof stats !== 'object') return '-';
  const s = stats as Record<string, unknown>;
  const keys = ['mean', 'latestMean', 'phi', 'groupCount', 'band'].filter((k) => s[k] !== undefined);
  return keys.length > 0 ? keys.map((k) => `${k}=${fmt(s[k])}`).join(' ') : JSON.stringify(s);
}

function lifeLines(l: TaskLife): string[] {
  const out: string[] = [];
  if (l.seeded)
    out.push(`seeded: pool v${l.seeded.poolVersion}${l.seeded.source ? ` (${l.seeded.source})` : ''}`);
  if (l.injected) out.push(`injected: step ${l.injected.step}, pool v${l.injected.poolVersion}`);
  for (const b of l.bandChanges) out.push(`band: ${b.from ?? '(new)'} -> ${b.to} at step ${b.step}`);
  if (l.retired)
    out.push(`retired: rule ${l.retired.rule}, step ${l.retired.step}, pool v${l.retired.poolVersion}`);
  if (l.pruned)
    out.push(
      `pruned: step ${l.pruned.step}, pool v${l.pruned.poolVersion}${l.pruned.phi !== null ? `, phi ${fmt(l.pruned.phi)}` : ''}`,
    );
  out.push(`status: ${l.status}`);
  return out;
}

/** The indented human view. */
export function renderTree(l: Lineage): string {
  const lines: string[] = [
    `lineage of ${l.taskId} (campaign ${l.campaignId})${l.complete ? '' : ' [INCOMPLETE: a chain does not reach a human seed]'}`,
  ];
  const walk = (n: LineageNode, indent: string) => {
    const pad = `${indent}  `;
    lines.push(
      `${indent}${n.origin === 'seed' ? 'human seed' : 'task'} ${n.taskId} [${n.category ?? '?'}] depth ${n.depth}, root ${n.rootSeedId}, hash ${short(n.taskHash)}`,
    );
    for (const x of lifeLines(n.life)) lines.push(`${pad}${x}`);
    const d = n.derivation;
    if (d) {
      lines.push(
        `${pad}derived from ${d.parents.join(', ') || '?'} by synthesis ${d.synthesisId ?? '?'} at step ${d.step ?? '?'}, policy ${d.policyVersion ?? '?'}`,
      );
      lines.push(
        `${pad}triggered by: phi ${d.parentPhi !== null ? fmt(d.parentPhi) : '?'}${d.selection ? `, quota slot ${d.selection.quotaSlot}` : ''}, stats ${statsLine(d.triggeringStats)}`,
      );
      for (const s of d.stages)
        lines.push(
          `${pad}stage ${s.stage}#${s.attempt}: model ${s.model ?? '-'}, prompt ${short(s.promptVersionHash)}, output ${short(s.outputHash)}`,
        );
      const scores = Object.entries(d.judge.scores)
        .map(([k, v]) => `${k}=${fmt(v)}`)
        .join(' ');
      lines.push(
        `${pad}judge: ${d.judge.verdict ?? '?'} by ${d.judge.model ?? '-'}${d.judge.refined ? ' (after refinement)' : ''}${scores ? `, ${scores}` : ''}`,
      );
    }
    for (const m of n.missingParents) lines.push(`${pad}parent ${m}: NO RECORD`);
    for (const p of n.parents) walk(p, `${pad}`);
  };
  walk(l.root, '');
  return `${lines.join('\n')}\n`;
}

/** Every node of the lineage once, child before its parents. */
function nodes(l: Lineage): LineageNode[] {
  const seen = new Map<string, LineageNode>();
  const walk = (n: LineageNode) => {
    if (seen.has(n.taskId)) return;
    seen.set(n.taskId, n);
    for (const p of n.parents) walk(p);
  };
  walk(l.root);
  return [...seen.values()];
}

function edges(l: Lineage): { parent: string; child: string; label: string }[] {
  const out: { parent: string; child: string; label: string }[] = [];
  for (const n of nodes(l)) {
    const d = n.derivation;
    const label = d
      ? `step ${d.step ?? '?'} ${d.synthesisId ?? ''} judge ${d.judge.verdict ?? '?'}`.trim()
      : 'derived';
    for (const p of n.parents) out.push({ parent: p.taskId, child: n.taskId, label });
    for (const m of n.missingParents) out.push({ parent: m, child: n.taskId, label: 'missing' });
  }
  return out;
}

const dotQuote = (s: string) => `"${s.replace(/\\/g, '\\\\').replace(/"/g, '\\"').replace(/\n/g, '\\n')}"`;

/** A Graphviz digraph, parent -> child. */
export function renderDot(l: Lineage): string {
  const out = [`digraph lineage {`, '  rankdir=TB;', '  node [shape=box, fontname="monospace"];'];
  for (const n of nodes(l)) {
    const label = [
      `${n.origin === 'seed' ? 'human seed' : 'task'} ${n.taskId}`,
      `depth ${n.depth}, ${n.life.status}`,
      ...(n.derivation
        ? [
            `models ${[...new Set(n.derivation.stages.map((s) => s.model).filter(Boolean))].join(', ') || '-'}`,
          ]
        : []),
    ].join('\n');
    out.push(
      `  ${dotQuote(n.taskId)} [label=${dotQuote(label)}${n.origin === 'seed' ? ', style=filled, fillcolor="#e8f4e8"' : ''}];`,
    );
    for (const m of n.missingParents)
      out.push(`  ${dotQuote(m)} [label=${dotQuote(`${m}\nNO RECORD`)}, color=red];`);
  }
  for (const e of edges(l))
    out.push(`  ${dotQuote(e.parent)} -> ${dotQuote(e.child)} [label=${dotQuote(e.label)}];`);
  out.push('}');
  return `${out.join('\n')}\n`;
}

/** A Mermaid flowchart block (`graph TD`), parent --> child. */
export function renderMermaid(l: Lineage): string {
  const ids = new Map<string, string>();
  const idOf = (t: string) => {
    let id = ids.get(t);
    if (!id) {
      id = `n${ids.size}`;
      ids.set(t, id);
    }
    return id;
  };
  const text = (s: string) => s.replace(/"/g, '#quot;');
  const out = ['graph TD'];
  for (const n of nodes(l)) {
    const label = `${n.origin === 'seed' ? 'human seed' : 'task'} ${n.taskId}<br/>depth ${n.depth}, ${n.life.status}`;
    out.push(
      n.origin === 'seed'
        ? `  ${idOf(n.taskId)}(["${text(label)}"])`
        : `  ${idOf(n.taskId)}["${text(label)}"]`,
    );
    for (const m of n.missingParents) out.push(`  ${idOf(m)}["${text(`${m} (no record)`)}"]`);
  }
  for (const e of edges(l)) out.push(`  ${idOf(e.parent)} -->|"${text(e.label)}"| ${idOf(e.child)}`);
  return `${out.join('\n')}\n`;
}

export const LINEAGE_FORMATS = ['tree', 'json', 'dot', 'mermaid'] as const;
export type LineageFormat = (typeof LINEAGE_FORMATS)[number];

export function renderLineage(l: Lineage, format: LineageFormat): string {
  switch (format) {
    case 'tree':
      return renderTree(l);
    case 'json':
      return `${JSON.stringify(l, null, 2)}\n`;
    case 'dot':
      return renderDot(l);
    case 'mermaid':
      return renderMermaid(l);
  }
}
