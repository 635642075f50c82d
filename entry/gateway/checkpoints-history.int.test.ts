// Property, on the real gateway and store: random training histories (test/support/checkpoints/
// model.ts) played through the checkpoint route, the aggregator's batch path and the campaign's
// missing-step policy. The gateway records a checkpoint exactly when the model says every step up
// to it is closed, never holds one for ever, records the root the domain core computes for it,
// and `rods audit verify` recomputes every root from the log after everything recorded later.
// RODS_PROPERTY_RUNS_INT sets the number of histories (the chaos soak runs more).
import { randomUUID } from 'node:crypto';
import fc from 'fast-check';
import type { FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { verifyManifests } from '../../analysis/manifest/manifest.js';
import { candidateHash } from '../../domain/candidate.js';
import type { CheckpointRecord } from '../../domain/manifest.js';
import type { Pool } from '../../platform/store/db.js';
import { missingStep, passable, skipMissingStep } from '../../platform/store/steps/missing-step.js';
import { CampaignHistory, taskRecord } from '../../test/support/checkpoints/history.js';
import {
  AFTER_STEPS,
  actionsArb,
  MODEL_TASKS,
  ModelCampaign,
  type ScriptEvent,
  script,
  summariesInOnePass,
} from '../../test/support/checkpoints/model.js';
import {
  type GatewayUnderTest,
  startGatewayUnderTest,
} from '../../test/support/gateway/gateway-under-test.js';

const RUNS = Number(process.env.RODS_PROPERTY_RUNS_INT ?? 40);
const TOKEN = `tok-${randomUUID()}`;
const AUTH = { authorization: `Bearer ${TOKEN}` };
let gateway: GatewayUnderTest;
let app: FastifyInstance;
let db: Pool;
const campaigns: string[] = [];
const identity = (taskId: string) => ({
  contentHash: candidateHash(taskRecord(taskId)),
  lineageRoot: taskId,
});

beforeAll(async () => {
  gateway = await startGatewayUnderTest({
    application: 'rods-checkpoints-history-test',
    tokens: [TOKEN],
    taskQueue: `checkpoints-history-${randomUUID().slice(0, 8)}`,
  });
  ({ app, db } = gateway);
});

afterAll(async () => {
  await gateway?.close(campaigns);
});

async function play(events: readonly ScriptEvent[]): Promise<void> {
  const h = await new CampaignHistory(db, 'ckh').start(MODEL_TASKS, {
    ingestion: { missingSteps: { policy: 'move-on', afterSteps: AFTER_STEPS } },
  });
  campaigns.push(h.campaignId);
  const c = h.campaignId;
  const m = new ModelCampaign();
  const roots = new Map<string, string>();
  let top = 0;
  // The model decides what must happen; the real gateway must answer the same.
  const post = async (record: CheckpointRecord) => {
    const r = await app.inject({
      method: 'POST',
      url: `/v1/campaigns/${c}/checkpoints`,
      headers: AUTH,
      payload: {
        checkpointId: record.checkpointId,
        runId: record.runId,
        step: record.trainerStep,
        resumedFrom: record.resumedFrom,
        retrainedSteps: record.retrainedSteps.map((s) => ({
          step: s.step,
          groups: s.tasks.map((t) => ({ taskId: t.taskId, rollouts: t.rollouts })),
        })),
      },
    });
    return r;
  };
  const deliver = async () => {
    // What the model records, the gateway records, with the root the model computes.
    const before = m.recorded.length;
    const pending: CheckpointRecord[] = [];
    m.apply({ kind: 'deliver' }, (x) => {
      pending.push(x);
      return 'recorded';
    });
    expect(m.recorded.length - before).toBe(pending.length);
    for (const x of pending) {
      const r = await post(x);
      expect(r.statusCode, `${x.checkpointId}: ${r.body}`).toBe(201);
      const upTo = m.recorded.slice(0, m.recorded.indexOf(x));
      const expected = summariesInOnePass([x], upTo, (s) => m.record.get(s), identity).get(x.checkpointId)!;
      expect(r.json()).toMatchObject({
        manifestRoot: expected.root,
        tasks: expected.tasks,
        groups: expected.groups,
      });
      roots.set(x.checkpointId, r.json().manifestRoot);
    }
    // The next one waiting, if any, is told so.
    const head = m.queue[0];
    if (head) {
      const r = await post(head.record);
      expect(r.statusCode, `${head.record.checkpointId}: ${r.body}`).toBe(503);
      expect(r.json().type).toBe('urn:rods:problem:checkpoint-ahead');
    }
  };
  const tick = async () => {
    for (let s = 1; s <= top; s++) {
      const gap = await missingStep(db, c, s);
      if (gap && passable(gap, AFTER_STEPS))
        expect(await skipMissingStep(db, c, s, AFTER_STEPS)).not.toBeNull();
    }
    m.apply({ kind: 'tick' });
  };
  for (const e of events) {
    if (e.kind === 'report') {
      top = Math.max(top, e.step);
      await h.step(
        e.step,
        e.tasks.map((t) => t.taskId),
        { rollouts: e.tasks[0]!.rollouts },
      );
      m.apply(e);
    } else if (e.kind === 'refuse') {
      top = Math.max(top, e.step);
      const r = await app.inject({
        method: 'POST',
        url: `/v1/campaigns/${c}/steps/${e.step}/rollouts`,
        headers: AUTH,
        payload: {
          batchId: `refused-${e.step}`,
          policyVersion: 'p',
          close: true,
          groups: e.tasks.map((t) => ({ taskId: t.taskId, rewards: [2] })),
        },
      });
      expect(r.statusCode).toBe(422);
      m.apply(e);
    } else if (e.kind === 'checkpoint') m.apply(e);
    else if (e.kind === 'deliver') await deliver();
    else await tick();
  }
  for (let i = 0; i < 50 && m.queue.length > 0; i++) {
    await tick();
    await deliver();
  }
  expect(m.queue.map((q) => q.record.checkpointId)).toEqual([]);
  const checks = await verifyManifests(db, c);
  expect(checks.map((x) => [x.checkpointId, x.ok, x.problem ?? null])).toEqual(
    m.recorded.map((x) => [x.checkpointId, true, null]),
  );
  expect(checks.map((x) => x.recordedRoot)).toEqual(m.recorded.map((x) => roots.get(x.checkpointId)));
}

describe('checkpoint manifests over random training histories, on the real gateway', () => {
  it(`${RUNS} histories: recorded when the model says, with its root, none waiting for ever, all verified`, async () => {
    await fc.assert(
      fc.asyncProperty(actionsArb, async (actions) => play(script(actions))),
      { numRuns: RUNS },
    );
  }, 600_000);
});
