// The Graphviz rendering of a lineage (`--format dot`).
import type { Lineage } from '../model.js';
import { edges, nodes } from './graph.js';

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
