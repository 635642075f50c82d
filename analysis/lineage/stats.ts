// Per-generation statistics of a campaign's pool (`rods lineage --campaign C --stats`), from the
// lineage model. Pure.
import type { LineageIndex } from './model.js';

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
