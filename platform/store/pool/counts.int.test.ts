// pool_member_counts and candidate_counts (migration 0020) stay equal to counting the rows, through
// inserts, retirements, prunings, status changes and deletes, whoever writes the rows.
import { randomUUID } from 'node:crypto';
import { afterAll, describe, expect, it } from 'vitest';
import { createPool } from '../db.js';
import { poolComposition, poolView } from './view.js';

const pool = createPool({ application: 'rods-pool-counts-test', max: 2 });
afterAll(() => pool.end());

async function recount(campaignId: string) {
  const members = await pool.query(
    `select origin, depth, case when active then 'active' when removed_rule = 'pruned' then 'pruned' else 'retired' end as state,
            count(*)::int as n from pool_members where campaign_id = $1 group by 1, 2, 3 order by 1, 2, 3`,
    [campaignId],
  );
  const kept = await pool.query(
    'select origin, depth, state, n::int as n from pool_member_counts where campaign_id = $1 and n > 0 order by 1, 2, 3',
    [campaignId],
  );
  const cands = await pool.query(
    'select status, count(*)::int as n from candidates where campaign_id = $1 group by 1 order by 1',
    [campaignId],
  );
  const keptCands = await pool.query(
    'select status, n::int as n from candidate_counts where campaign_id = $1 and n > 0 order by 1',
    [campaignId],
  );
  return { members: [members.rows, kept.rows], candidates: [cands.rows, keptCands.rows] };
}

describe('pool counts', () => {
  it('follow every change of the counted rows', async () => {
    const campaignId = `counts-${randomUUID().slice(0, 8)}`;
    const member = (taskId: string, origin: string, depth: number) =>
      pool.query(
        `insert into pool_members (campaign_id, task_id, origin, category, task, task_hash, root_seed, depth, added_step, added_version)
         values ($1, $2, $3, 'base', '{}', 'h', 's', $4, 0, 1)`,
        [campaignId, taskId, origin, depth],
      );
    const candidate = (id: string) =>
      pool.query(
        `insert into candidates (campaign_id, candidate_hash, candidate_id, synthesis_id, seed_task_id, status, candidate, lineage)
         values ($1, $2, $2, 'x', 's', 'validated', '{}', '{}')`,
        [campaignId, id],
      );
    for (let i = 0; i < 5; i++) await member(`s${i}`, 'seed', 0);
    for (let i = 0; i < 6; i++) await member(`g${i}`, 'generated', 1 + (i % 2));
    for (let i = 0; i < 4; i++) await candidate(`c${i}`);
    await pool.query(
      `update pool_members set active = false, removed_rule = 'mastered' where campaign_id = $1 and task_id in ('g0', 's1')`,
      [campaignId],
    );
    await pool.query(
      `update pool_members set active = false, removed_rule = 'pruned' where campaign_id = $1 and task_id = 'g1'`,
      [campaignId],
    );
    await pool.query(
      `update candidates set status = 'injected' where campaign_id = $1 and candidate_id in ('c0', 'c1')`,
      [campaignId],
    );
    await pool.query(`delete from candidates where campaign_id = $1 and candidate_id = 'c3'`, [campaignId]);
    await pool.query(`delete from pool_members where campaign_id = $1 and task_id = 'g5'`, [campaignId]);
    // A write that touches a counted column without changing it moves nothing.
    await pool.query(`update pool_members set depth = depth where campaign_id = $1`, [campaignId]);
    const r = await recount(campaignId);
    expect(r.members[1]).toEqual(r.members[0]);
    expect(r.candidates[1]).toEqual(r.candidates[0]);

    const view = await poolView(pool, campaignId);
    expect(view).toMatchObject({
      active: 7,
      retired: 2,
      pruned: 1,
      candidates: { validated: 1, injected: 2 },
    });
    expect(await poolComposition(pool, campaignId)).toEqual([
      { origin: 'seed', depth: 0, active: 4, retired: 1, pruned: 0 },
      { origin: 'generated', depth: 1, active: 2, retired: 1, pruned: 0 },
      { origin: 'generated', depth: 2, active: 1, retired: 0, pruned: 1 },
    ]);
  });
});
