// The indented human view of a lineage (`--format tree`).
import type { Lineage, LineageNode, TaskLife } from '../model.js';

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
  if (l.bandWindow)
    lines.push(`band changes of steps ${l.bandWindow.from}-${l.bandWindow.to} (--steps N for more)`);
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
