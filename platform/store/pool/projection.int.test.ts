// The pool projection stores an injected task's lineage as the decider assigned it (carried on the
// event), not by a rule of its own; events recorded before the depth was carried still project as
// they did (root and depth from the first parent's row).
import { randomUUID } from 'node:crypto';
import { afterAll, describe, expect, it } from 'vitest';
import { workerEvent } from '../../../activities/events.js';
import { streams } from '../../../domain/ids.js';
import { childLineage, seedLineage } from '../../../domain/lineage.js';
import { createPool } from '../db.js';
import { recordEvents } from './projection.js';

const pool = createPool({ application: 'rods-pool-projection-test', max: 2 });
afterAll(() => pool.end());

describe('pool projection lineage', () => {
  it("stores the decider's root and depth, and reads older events from the first parent", async () => {
    const campaignId = `lineage-${randomUUID().slice(0, 8)}`;
    const stream = streams.campaign(campaignId);
    const task = JSON.stringify({ turns: [] });
    const common = { campaignId, category: 'base', task, taskHash: randomUUID(), occurredAt: Date.now() };
    await recordEvents(pool, stream, [
      workerEvent('TaskSeeded', randomUUID(), { ...common, taskId: 'A', source: 'test', poolVersion: 1 }),
    ]);
    const inject = (taskId: string, parents: string[], version: number, metadata: Record<string, unknown>) =>
      recordEvents(pool, stream, [
        workerEvent(
          'TaskInjected',
          randomUUID(),
          { ...common, taskId, candidateId: `c-${taskId}`, parents, poolVersion: version, step: version },
          metadata,
        ),
      ]);
    // G1 from A; G2 from A and G1: the method's rule gives G2 its deepest parent's depth plus one (2),
    // where following the first parent alone would give 1.
    const lineages = new Map([['A', seedLineage('A')]]);
    const g1 = childLineage(['A'], (t) => lineages.get(t));
    lineages.set('G1', g1);
    const g2 = childLineage(['A', 'G1'], (t) => lineages.get(t));
    expect(g2).toEqual({ rootSeedId: 'A', depth: 2 });
    await inject('G1', ['A'], 2, { rootSeed: g1.rootSeedId, depth: g1.depth });
    await inject('G2', ['A', 'G1'], 3, { rootSeed: g2.rootSeedId, depth: g2.depth });
    // Recorded before the depth was carried: only rootSeed in the metadata.
    await inject('OLD', ['A', 'G1'], 4, { rootSeed: 'A' });

    const { rows } = await pool.query<{ task_id: string; root_seed: string; depth: number }>(
      'select task_id, root_seed, depth from pool_members where campaign_id = $1 order by task_id',
      [campaignId],
    );
    expect(rows).toEqual([
      { task_id: 'A', root_seed: 'A', depth: 0 },
      { task_id: 'G1', root_seed: 'A', depth: 1 },
      { task_id: 'G2', root_seed: 'A', depth: 2 },
      { task_id: 'OLD', root_seed: 'A', depth: 1 },
    ]);
  });
});
