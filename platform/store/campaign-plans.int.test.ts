// Plans keep their pool state only at step 0, every PLAN_STATE_EVERY steps and while newest; a past
// step's pool is rebuilt from the nearest kept state and the plans after it.
import { randomUUID } from 'node:crypto';
import { afterAll, describe, expect, it } from 'vitest';
import { insertPlan, PLAN_STATE_EVERY, poolAtStep, recordedPlan } from './campaign-plans.js';
import { createPool } from './db.js';

const pool = createPool({ application: 'rods-campaign-plans-test', max: 2 });
afterAll(() => pool.end());

describe('plan states', () => {
  it('are kept at checkpoints and at the newest plan, and any past pool is rebuilt from them', async () => {
    const campaignId = `plans-${randomUUID().slice(0, 8)}`;
    // A pool that injects t<step> each step, retires the task injected 3 steps before every other
    // step, and at every 7th step injects a task it prunes at once.
    let members = ['s1', 's2', 's3'];
    const truth = new Map<number, { version: number; members: string[] }>();
    await insertPlan(pool, campaignId, 0, { version: 1, members: members.map((taskId) => ({ taskId })) }, {});
    truth.set(0, { version: 1, members: [...members].sort() });
    const last = 2 * PLAN_STATE_EVERY + 13;
    for (let step = 1; step <= last; step++) {
      const injected = [`t${step}`, ...(step % 7 === 0 ? [`x${step}`] : [])];
      const retired = step % 2 === 0 && step > 3 ? [{ taskId: `t${step - 3}`, rule: 'mastered' }] : [];
      const pruned = step % 7 === 0 ? [`x${step}`] : [];
      members = [...members, `t${step}`].filter((t) => !retired.some((r) => r.taskId === t));
      const version = step + 1;
      const selected = [{ taskId: 's1', task: { id: 's1', question: [['a long task record']] } }];
      await insertPlan(
        pool,
        campaignId,
        step,
        { version, members: members.map((taskId) => ({ taskId })) },
        { step, poolVersion: version, injected, retired, pruned, selected },
      );
      truth.set(step, { version, members: [...members].sort() });
    }
    const { rows } = await pool.query<{ step: string; kept: boolean; task: boolean }>(
      `select step, state is not null as kept, (result->'selected'->0) ? 'task' as task
         from campaign_plans where campaign_id = $1 order by step`,
      [campaignId],
    );
    expect(rows.filter((r) => r.kept).map((r) => Number(r.step))).toEqual([
      0,
      PLAN_STATE_EVERY,
      2 * PLAN_STATE_EVERY,
      last,
    ]);
    // Only the newest plan still carries its selected seeds' task records.
    expect(rows.filter((r) => r.task).map((r) => Number(r.step))).toEqual([last]);
    expect(await recordedPlan(pool, campaignId, 5)).toMatchObject({ selected: [{ taskId: 's1' }] });
    for (const step of [0, 1, 7, 42, PLAN_STATE_EVERY, PLAN_STATE_EVERY + 1, 2 * PLAN_STATE_EVERY - 1, last])
      expect(await poolAtStep(pool, campaignId, step)).toEqual(truth.get(step));
    expect(await poolAtStep(pool, campaignId, last + 1)).toBeUndefined();
  });
});
