// A step the trainer never closed while later steps closed: the campaign used to wait for it for
// ever while `rods doctor` called that a wait. Now status and doctor name the step and what was
// received for it, and the campaign follows ingestion.missingSteps: `move-on` passes over it once
// `afterSteps` later steps closed (StepSkipped, recorded once) and plans on; `wait` holds, as a
// stall, until a reconfiguration to move-on reaches the wait already running.
import { afterAll, describe, expect, it } from 'vitest';
import { campaignStatus } from '../../analysis/status/campaign-status.js';
import { diagnose } from '../../analysis/status/diagnose.js';
import { LoopHarness } from '../../dev/harness/loop.js';
import { noteStepRefusal } from '../../platform/store/steps/refusals.js';
import { reconfigureUpdate } from '../../platform/temporal/campaign-messages.js';
import { waitUntil } from '../../test/support/wait.js';

const STEPS_ONLY = {
  seeds: { perCategory: 1 },
  selection: { budgetPerStep: 0, perCategoryQuota: {}, cooldownSteps: 0, maxConcurrentSyntheses: 1 },
};
const loops: LoopHarness[] = [];

afterAll(async () => {
  for (const l of loops) await l.close();
});

async function started(config: Record<string, unknown>): Promise<LoopHarness> {
  const loop = new LoopHarness({ config, campaignId: `gap-${Math.random().toString(36).slice(2, 10)}` });
  loops.push(loop);
  await loop.start();
  return loop;
}

const status = (loop: LoopHarness) =>
  campaignStatus({ db: loop.pool, temporal: loop.client }, loop.campaignId, { deadLetters: false }).then(
    (r) => r!,
  );

async function skipped(loop: LoopHarness) {
  const { rows } = await loop.pool.query<{ payload: Record<string, unknown> }>(
    `select payload from events where type = 'StepSkipped' and payload->>'campaignId' = $1`,
    [loop.campaignId],
  );
  return rows.map((r) => r.payload);
}

describe('a step that never comes while later steps close', () => {
  it('move-on: named as a wait until afterSteps later steps closed, then passed over once and planned', async () => {
    const loop = await started({
      ...STEPS_ONLY,
      ingestion: { missingSteps: { policy: 'move-on', afterSteps: 3 } },
    });
    await loop.trainStep(1);
    await loop.waitPlanned(1);
    for (const step of [3, 4]) await loop.trainStep(step); // step 2 never sent
    await waitUntil(async () => (await status(loop)).holds?.missingStep?.laterClosed === 2, {
      what: 'status to name step 2 as missing with 2 later steps closed',
      timeoutMs: 60_000,
      intervalMs: 250,
    });
    const r = await status(loop);
    expect(r.holds?.missingStep).toMatchObject({
      step: 2,
      laterClosed: 2,
      laterFrom: 3,
      laterTo: 4,
      received: { batches: 0, groups: 0 },
      policy: 'move-on',
      afterSteps: 3,
    });
    const findings = diagnose(r);
    expect(findings.find((f) => f.code === 'missing-step')).toMatchObject({ level: 'wait' });
    expect(findings.find((f) => f.code === 'missing-step')!.what).toContain(
      'step 2 never closed while 2 later steps did (3-4); nothing was received for it',
    );
    expect(findings.some((f) => f.code === 'closed-not-planned')).toBe(false);
    expect(await skipped(loop)).toEqual([]);
    expect((await loop.status()).step).toBe(1);

    await loop.trainStep(5);
    await loop.waitPlanned(5);
    const events = await skipped(loop);
    expect(events).toHaveLength(1);
    expect(events[0]).toMatchObject({ step: 2, afterSteps: 3, laterClosed: 3, batches: 0, groups: 0 });
    expect(String(events[0]!.reason)).toContain('step 2 never closed while 3 later steps did (3-5)');
    const row = await loop.pool.query<{ closed: boolean; summary: { skipped?: boolean } }>(
      'select closed_at is not null as closed, summary from steps where campaign_id = $1 and step = 2',
      [loop.campaignId],
    );
    expect(row.rows[0]).toMatchObject({ closed: true, summary: { skipped: true } });
    const plans = await loop.pool.query<{ step: number }>(
      'select step::int as step from campaign_plans where campaign_id = $1 and step > 0 order by step',
      [loop.campaignId],
    );
    expect(plans.rows.map((p) => p.step)).toEqual([1, 2, 3, 4, 5]);
    expect((await status(loop)).holds?.missingStep).toBeNull();
  }, 180_000);

  it('move-on: a step whose closing batch was refused is passed over at once, with the refusal as its reason', async () => {
    const loop = await started({
      ...STEPS_ONLY,
      ingestion: { missingSteps: { policy: 'move-on', afterSteps: 3 } },
    });
    await loop.trainStep(1);
    await loop.waitPlanned(1);
    // The gateway refused step 2's closing batch (as entry/gateway/routes/rollouts.ts notes it); no later step comes.
    await noteStepRefusal(loop.pool, loop.campaignId, {
      step: 2,
      batchId: 'b2',
      problem: 'unknown-task',
      detail: 'invalid rollout batch: 1 task(s) not in the pool',
    });
    await loop.waitPlanned(2);
    const events = await skipped(loop);
    expect(events).toHaveLength(1);
    expect(events[0]).toMatchObject({ step: 2, laterClosed: 0, batches: 0 });
    expect(String(events[0]!.reason)).toMatch(
      /^step 2 never closed: its closing batch b2 was refused at .* \(unknown-task\): invalid rollout batch/,
    );
  }, 180_000);

  it('wait: a stall naming the step until a reconfiguration to move-on passes over it', async () => {
    const config = { ...STEPS_ONLY, ingestion: { missingSteps: { policy: 'wait', afterSteps: 1 } } };
    const loop = await started(config);
    await loop.trainStep(1);
    await loop.waitPlanned(1);
    for (const step of [3, 4, 5]) await loop.trainStep(step);
    const r = await waitUntil(
      async () => {
        const s = await status(loop);
        return s.holds?.missingStep?.laterClosed === 3 ? s : null;
      },
      { what: 'status to name step 2 as missing', timeoutMs: 60_000, intervalMs: 250 },
    );
    const finding = diagnose(r).find((f) => f.code === 'missing-step')!;
    expect(finding.level).toBe('stall');
    expect(finding.action).toContain('ingestion.missingSteps.policy "move-on"');
    // The campaign holds at step 1 (well past the 2-second gap checks of its wait).
    await new Promise((res) => setTimeout(res, 5000));
    expect((await loop.status()).step).toBe(1);
    expect(await skipped(loop)).toEqual([]);

    await loop.client.workflow.getHandle(loop.workflowId).executeUpdate(reconfigureUpdate, {
      args: [{ config: { ...config, ingestion: { missingSteps: { policy: 'move-on', afterSteps: 1 } } } }],
    });
    await loop.waitPlanned(5);
    expect((await skipped(loop)).map((e) => e.step)).toEqual([2]);
  }, 180_000);
});
