// POST /v1/campaigns/:id/checkpoints on a real gateway and store (fastify's inject): a checkpoint
// that waits names what it waits for, never lies about a step that never closed, reads a bounded
// amount whatever the campaign's history, answers concurrent reports of one id with the recorded
// receipt or a 409, refuses what its event cannot encode, and every root it records is the one
// `rods audit verify` recomputes from the log, whatever is recorded after it.
import { randomUUID } from 'node:crypto';
import type { FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { verifyManifests } from '../../analysis/manifest/manifest.js';
import { campaignStatus } from '../../analysis/status/campaign-status.js';
import { diagnose } from '../../analysis/status/diagnose.js';
import { encode } from '../../platform/codec/registry.js';
import type { Pool } from '../../platform/store/db.js';
import { createPool } from '../../platform/store/db.js';
import { checkpointEvents } from '../../platform/store/events/checkpoints.js';
import { skipMissingStep } from '../../platform/store/steps/missing-step.js';
import { CampaignHistory } from '../../test/support/checkpoints/history.js';
import {
  type GatewayUnderTest,
  startGatewayUnderTest,
} from '../../test/support/gateway/gateway-under-test.js';
import { migrationUp, withScratchSchema } from '../../test/support/store/migration-scratch.js';

const TOKEN = `tok-${randomUUID()}`;
const AUTH = { authorization: `Bearer ${TOKEN}` };
let gateway: GatewayUnderTest;
let app: FastifyInstance;
let db: Pool;
const campaigns: string[] = [];
const TASKS = ['t-a', 't-b', 't-c', 't-d'];

async function history(config: Record<string, unknown> = {}): Promise<CampaignHistory> {
  const h = await new CampaignHistory(db, 'ckpt').start(TASKS, config);
  campaigns.push(h.campaignId);
  return h;
}

interface Report {
  checkpointId: string;
  runId: string;
  step: number;
  resumedFrom?: string | null;
  retrainedSteps?: { step: number; groups: { taskId: string; rollouts: number }[] }[];
}
const checkpoint = (campaignId: string, body: Report | Record<string, unknown>) =>
  app.inject({
    method: 'POST',
    url: `/v1/campaigns/${campaignId}/checkpoints`,
    payload: body,
    headers: AUTH,
  });

beforeAll(async () => {
  gateway = await startGatewayUnderTest({
    application: 'rods-checkpoints-test',
    tokens: [TOKEN],
    taskQueue: `checkpoints-test-${randomUUID().slice(0, 8)}`,
  });
  ({ app, db } = gateway);
});

afterAll(async () => {
  await gateway?.close(campaigns);
});

describe('a checkpoint waiting for a step', () => {
  it('names a refused step, is recorded once the missing-step policy passes over it, and never before', async () => {
    const h = await history({ ingestion: { missingSteps: { policy: 'move-on', afterSteps: 2 } } });
    const c = h.campaignId;
    await h.step(1, TASKS);
    // Step 2's closing batch is refused (a reward out of range): the step stays open for good.
    const refused = await app.inject({
      method: 'POST',
      url: `/v1/campaigns/${c}/steps/2/rollouts`,
      headers: AUTH,
      payload: {
        batchId: 'b2',
        policyVersion: 'p',
        close: true,
        groups: [{ taskId: 't-a', rewards: [1.5] }],
      },
    });
    expect(refused.statusCode).toBe(422);

    const first = await checkpoint(c, { checkpointId: 'c2', runId: 'r1', step: 2 });
    expect(first.statusCode).toBe(503);
    expect(first.json()).toMatchObject({
      type: 'urn:rods:problem:checkpoint-ahead',
      step: 2,
      waitsForStep: 2,
    });
    expect(first.json().detail).toMatch(
      /waits: step 2 never closed: its closing batch b2 was refused at .*reward/,
    );

    // Later steps close (the trainer goes on); a checkpoint past the gap waits for it too.
    await h.steps(3, 4, TASKS);
    const past = await checkpoint(c, { checkpointId: 'c4', runId: 'r1', step: 4 });
    expect(past.statusCode).toBe(503);
    expect(past.json().detail).toMatch(/step 2 never closed while 2 later steps did .*refused/);

    // What status says while they wait: each checkpoint with its step and why.
    const status = await campaignStatus({ db, temporal: null }, c, { kafkaTimeoutMs: 1, deadLetters: false });
    expect(status!.holds!.checkpointsWaiting.map((w) => [w.checkpointId, w.waitsForStep])).toEqual([
      ['c2', 2],
      ['c4', 2],
    ]);
    expect(
      diagnose(status!)
        .filter((f) => f.code === 'checkpoint-waiting')
        .map((f) => f.what),
    ).toEqual([
      expect.stringMatching(/^checkpoint c2 \(step 2\) waits for step 2: .*refused.*asked 1 time/),
      expect.stringMatching(/^checkpoint c4 \(step 4\) waits for step 2: /),
    ]);

    // The campaign's missing-step policy passes over step 2 (as its workflow does): both are recorded.
    expect(await skipMissingStep(db, c, 2, 2)).not.toBeNull();
    expect((await checkpoint(c, { checkpointId: 'c2', runId: 'r1', step: 2 })).statusCode).toBe(201);
    const c4 = await checkpoint(c, { checkpointId: 'c4', runId: 'r1', step: 4 });
    expect(c4.statusCode).toBe(201);
    expect(c4.json()).toMatchObject({ tasks: 4, groups: 12 });
    const after = await campaignStatus({ db, temporal: null }, c, { kafkaTimeoutMs: 1, deadLetters: false });
    expect(after!.holds!.checkpointsWaiting).toEqual([]);
    expect((await verifyManifests(db, c)).every((m) => m.ok)).toBe(true);
  });

  it('waits for a step never reported at all below closed ones (a manifest never skips a step silently)', async () => {
    const h = await history();
    await h.step(1, TASKS);
    await h.steps(3, 5, TASKS);
    const r = await checkpoint(h.campaignId, { checkpointId: 'c5', runId: 'r1', step: 5 });
    expect(r.statusCode).toBe(503);
    expect(r.json()).toMatchObject({ waitsForStep: 2 });
    expect(r.json().detail).toMatch(/step 2 never closed while 3 later steps did/);
  });
});

describe('what a checkpoint request reads', () => {
  it('a probe of a waiting checkpoint reads a few rows, however many large checkpoints the campaign holds', async () => {
    const h = await history();
    const c = h.campaignId;
    const many = Array.from({ length: 3000 }, (_, i) => `big-${i}`);
    await h.seed(many);
    await h.steps(1, 3, TASKS);
    // Large reports: every retrained step names 3,000 tasks (what a retrained step can be at most is
    // what the campaign's pool holds, each task once).
    const retrained = [1, 2, 3].map((step) => ({
      step,
      groups: many.map((taskId) => ({ taskId, rollouts: 16 })),
    }));
    for (let i = 0; i < 6; i++) {
      const r = await checkpoint(c, {
        checkpointId: `big-${i}`,
        runId: `run-${i}`,
        step: 3,
        retrainedSteps: retrained,
      });
      expect(r.statusCode).toBe(201);
    }
    const stream = await checkpointEvents(db, c);
    const streamBytes = JSON.stringify(stream.map((e) => e.payload)).length;
    expect(streamBytes).toBeGreaterThan(700_000);
    // Count what the gateway reads from PostgreSQL for a probe of a checkpoint ahead of the steps.
    let read = 0;
    const original = db.query.bind(db);
    (db as unknown as { query: unknown }).query = async (...args: Parameters<typeof original>) => {
      const res = await (original as (...a: unknown[]) => Promise<{ rows: unknown[] }>)(...args);
      read += JSON.stringify(res.rows ?? []).length;
      return res;
    };
    try {
      const probes = await Promise.all(
        Array.from({ length: 16 }, (_, i) =>
          checkpoint(c, { checkpointId: `probe-${i}`, runId: 'r-p', step: 9 }),
        ),
      );
      expect(probes.map((p) => p.statusCode)).toEqual(Array(16).fill(503));
      const again = await checkpoint(c, {
        checkpointId: 'big-0',
        runId: 'run-0',
        step: 3,
        retrainedSteps: retrained,
      });
      expect(again.statusCode).toBe(200);
    } finally {
      (db as unknown as { query: unknown }).query = original;
    }
    expect(read).toBeLessThan(64 * 1024);
  });

  it('refuses a task named twice in one retrained step', async () => {
    const h = await history();
    await h.steps(1, 2, TASKS);
    const r = await checkpoint(h.campaignId, {
      checkpointId: 'dup',
      runId: 'r1',
      step: 2,
      retrainedSteps: [
        {
          step: 2,
          groups: [
            { taskId: 't-a', rollouts: 4 },
            { taskId: 't-a', rollouts: 4 },
          ],
        },
      ],
    });
    expect(r.statusCode).toBe(422);
    expect(r.json().errors).toEqual([
      { field: 'retrainedSteps[0].groups[1].taskId', message: expect.stringMatching(/named twice/) },
    ]);
  });
});

describe('roots that later reports cannot change', () => {
  it("a run's later checkpoint of an earlier step with a retrained step leaves the earlier checkpoint's root as recorded", async () => {
    const h = await history();
    const c = h.campaignId;
    await h.steps(1, 5, TASKS);
    expect((await checkpoint(c, { checkpointId: 'c1', runId: 'r1', step: 5 })).statusCode).toBe(201);
    const c3 = await checkpoint(c, {
      checkpointId: 'c3',
      runId: 'r1',
      step: 3,
      retrainedSteps: [{ step: 2, groups: [{ taskId: 't-b', rollouts: 8 }] }],
    });
    expect(c3.statusCode).toBe(201);
    const checks = await verifyManifests(db, c);
    expect(checks.map((m) => [m.checkpointId, m.ok, m.problem ?? null])).toEqual([
      ['c1', true, null],
      ['c3', true, null],
    ]);
    // And a checkpoint of the run recorded after both reads the retrained step.
    await h.steps(6, 6, TASKS);
    expect((await checkpoint(c, { checkpointId: 'c6', runId: 'r1', step: 6 })).statusCode).toBe(201);
    expect((await verifyManifests(db, c)).every((m) => m.ok)).toBe(true);
  });
});

describe('concurrent reports of one checkpoint id', () => {
  it('record one; every other caller gets the recorded receipt or a 409 naming the difference', async () => {
    const h = await history();
    const c = h.campaignId;
    await h.steps(1, 10, TASKS);
    for (let trial = 0; trial < 10; trial++) {
      const id = `race-${trial}`;
      const [a, b, same] = await Promise.all([
        checkpoint(c, { checkpointId: id, runId: 'r1', step: 5 }),
        checkpoint(c, { checkpointId: id, runId: 'r1', step: 10 }),
        checkpoint(c, { checkpointId: id, runId: 'r1', step: 5 }),
      ]);
      const recorded = (await checkpointEvents(db, c)).filter((e) => e.payload.checkpointId === id);
      expect(recorded).toHaveLength(1);
      const root = recorded[0]!.payload.manifestRoot;
      const step = Number(recorded[0]!.payload.trainerStep);
      for (const [r, sent] of [
        [a, 5],
        [b, 10],
        [same, 5],
      ] as const) {
        if (sent === step) {
          expect([200, 201]).toContain(r.statusCode);
          expect(r.json().manifestRoot).toBe(root);
        } else {
          expect(r.statusCode).toBe(409);
          expect(r.json()).toMatchObject({
            type: 'urn:rods:problem:checkpoint-conflict',
            recordedRoot: root,
          });
          expect(r.json().detail).toContain(`step ${sent} (recorded: ${step})`);
        }
      }
      expect([a, b, same].filter((r) => r.statusCode === 201)).toHaveLength(1);
    }
  });
});

describe('numbers a CheckpointSaved can hold', () => {
  it('refuses rollouts and steps past what the event encodes, and what it accepts encodes', async () => {
    const h = await history();
    const c = h.campaignId;
    await h.steps(1, 2, TASKS);
    const withRollouts = (rollouts: number) =>
      checkpoint(c, {
        checkpointId: `n-${rollouts}`,
        runId: 'r1',
        step: 2,
        retrainedSteps: [{ step: 2, groups: [{ taskId: 't-a', rollouts }] }],
      });
    for (const bad of [2 ** 31, 18014398509481988, 1_000_001]) {
      const r = await withRollouts(bad);
      expect(r.statusCode, String(bad)).toBe(422);
      expect(r.json().errors[0].field).toBe('retrainedSteps[0].groups[0].rollouts');
    }
    const big = await checkpoint(c, { checkpointId: 'far', runId: 'r1', step: 1_000_000_000_000_000 });
    expect(big.statusCode).toBe(422);
    expect(big.json().errors[0].field).toBe('step');
    const ok = await withRollouts(1_000_000);
    expect(ok.statusCode).toBe(201);
    const [event] = (await checkpointEvents(db, c)).filter((e) => e.payload.checkpointId === 'n-1000000');
    expect(() => encode('CheckpointSaved', event!.payload)).not.toThrow();
  });

  it('refuses a retrained step the run did not train after the checkpoint it resumed from', async () => {
    const h = await history();
    const c = h.campaignId;
    await h.steps(1, 6, TASKS);
    expect((await checkpoint(c, { checkpointId: 'p4', runId: 'r1', step: 4 })).statusCode).toBe(201);
    const r = await checkpoint(c, {
      checkpointId: 'q6',
      runId: 'r2',
      step: 6,
      resumedFrom: 'p4',
      retrainedSteps: [{ step: 3, groups: [{ taskId: 't-a', rollouts: 4 }] }],
    });
    expect(r.statusCode).toBe(422);
    expect(r.json().errors[0].field).toBe('retrainedSteps[0].step');
    const unknown = await checkpoint(c, { checkpointId: 'q7', runId: 'r2', step: 6, resumedFrom: 'nope' });
    expect(unknown.statusCode).toBe(422);
    expect(unknown.json().type).toBe('urn:rods:problem:unknown-checkpoint');
  });
});

describe('checkpoints recorded before the rows existed (migration 0029)', () => {
  it('are copied from their events as the route writes them, keep their roots, and a repeat is compared with the copy', async () => {
    const h = await history();
    const c = h.campaignId;
    await h.steps(1, 4, TASKS);
    const report = {
      checkpointId: 'old',
      runId: 'r1',
      step: 4,
      retrainedSteps: [{ step: 3, groups: [{ taskId: 't-c', rollouts: 5 }] }],
    };
    expect((await checkpoint(c, report)).statusCode).toBe(201);
    const rows = async (q: (sql: string) => Promise<{ rows: unknown[] }>, schema = 'public') => ({
      records: (
        await q(
          `select checkpoint_id, seq, run_id, trainer_step, resumed_from, digest, manifest_root, manifest_tasks, manifest_groups from ${schema}.checkpoint_records where campaign_id = '${c}'`,
        )
      ).rows,
      retrained: (
        await q(
          `select checkpoint_id, step, task_ids, rollouts from ${schema}.checkpoint_retrained where campaign_id = '${c}'`,
        )
      ).rows,
    });
    const live = await rows((sql) => db.query(sql));
    expect(live.records).toHaveLength(1);
    // The migration's copy from the events, in a scratch schema over this campaign's events.
    const endpoints = inject('endpoints');
    const owner = createPool({
      connectionString: endpoints.ownerDatabaseUrl ?? endpoints.databaseUrl,
      application: 'rods-checkpoints-test-owner',
      max: 1,
    });
    try {
      await withScratchSchema(owner, { events: `stream_id = 'checkpoints-${c}'` }, async (tx, schema) => {
        await tx.query(migrationUp('0029_checkpoint_records.sql'));
        expect(await rows((sql) => tx.query(sql), schema)).toEqual(live);
      });
    } finally {
      await owner.end();
    }
    // A copied row has no report hash: the route computes it from the copy, then compares.
    await db.query('update checkpoint_records set report_hash = null where campaign_id = $1', [c]);
    const again = await checkpoint(c, report);
    expect(again.statusCode).toBe(200);
    expect(
      (await db.query('select report_hash from checkpoint_records where campaign_id = $1', [c])).rows[0]
        .report_hash,
    ).toMatch(/^[0-9a-f]{64}$/);
    const other = await checkpoint(c, {
      ...report,
      retrainedSteps: [{ step: 3, groups: [{ taskId: 't-c', rollouts: 6 }] }],
    });
    expect(other.statusCode).toBe(409);
    expect(other.json().detail).toContain('retrainedSteps: the tasks or rollouts of steps 3 differ');
    expect((await verifyManifests(db, c)).every((m) => m.ok)).toBe(true);
  });
});
