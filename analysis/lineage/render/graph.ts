// The lineage as a graph, shared by the dot and mermaid renderings: its nodes and its
// parent -> child edges (a missing parent is an edge labelled `missing`).
import type { Lineage, LineageNode } from '../model.js';

/** Every node of the lineage once, child before its parents. */
export function nodes(l: Lineage): LineageNode[] {
  const seen = new Map<string, LineageNode>();
  const walk = (n: LineageNode) => {
    if (seen.has(n.taskId)) return;
    seen.set(n.taskId, n);
    for (const p of n.parents) walk(p);
  };
  walk(l.root);
  return [...seen.values()];
}

export function edges(l: Lineage): { parent: string; child: string; label: string }[] {
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
