// The Mermaid rendering of a lineage (`--format mermaid`), for Markdown reports.
import type { Lineage } from '../model.js';
import { edges, nodes } from './graph.js';

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
