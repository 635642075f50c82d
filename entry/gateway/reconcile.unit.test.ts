// The batch reconciler against fakes of PostgreSQL and Temporal: which batches it starts and how,
// which campaigns it leaves alone, and that outages of either make ticks fail and retry with
// backoff, never an exception out of the timer.
import {
  type Client,
  WorkflowExecutionAlreadyStartedError,
  WorkflowIdReusePolicy,
  WorkflowNotFoundError,
} from '@temporalio/client';
import type pg from 'pg';
import { describe, expect, it } from 'vitest';
import { staysFalse, waitUntil } from '../../test/support/wait.js';
import { BatchReconciler, type ReconcileLog } from './reconcile.js';

const QUEUE = 'rods-q';

interface Row {
  campaignId: string;
  step: number;
  batchId: string;
}

/** ingestion_batches rows still accepted and older than the grace period, as the store reads them. */
function fakeDb(rows: Row[], state = { down: false }) {
  const graces: number[] = [];
  const db = {
    async query(sql: string, params: unknown[]) {
      if (state.down)
        throw Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:5432'), { code: 'ECONNREFUSED' });
      if (/group by campaign_id/.test(sql)) {
        graces.push(params[0] as number);
        const ids = [...new Set(rows.map((r) => r.campaignId))];
        return {
          rows: ids.map((id) => ({ campaign_id: id, n: rows.filter((r) => r.campaignId === id).length })),
        };
      }
      const [campaignId, grace, limit] = params as [string, number, number];
      graces.push(grace);
      return {
        rows: rows
          .filter((r) => r.campaignId === campaignId)
          .slice(0, limit)
          .map((r) => ({
            step: r.step,
            batch_id: r.batchId,
            claim_id: `claim-${r.campaignId}-${r.step}-${r.batchId}`,
            workflow_id: `ingest-${r.campaignId}-${r.step}-${r.batchId}`,
          })),
      };
    },
  };
  return { db: db as unknown as pg.Pool, graces, state };
}

type Campaign = { status: string; taskQueue: string } | 'missing';

function fakeTemporal(campaigns: Record<string, Campaign>, state = { down: false }) {
  const starts: { workflowId: string; taskQueue: string; reuse: unknown; args: unknown[] }[] = [];
  const running = new Set<string>();
  const unavailable = () =>
    Object.assign(new Error('14 UNAVAILABLE: No connection established'), { code: 14 });
  const client = {
    withAbortSignal: (_s: AbortSignal, fn: () => Promise<unknown>) => fn(),
    withDeadline: (_d: number, fn: () => Promise<unknown>) => fn(),
    workflow: {
      getHandle: (id: string) => ({
        async describe() {
          if (state.down) throw unavailable();
          const c = campaigns[id.replace(/^campaign-/, '')];
          if (!c || c === 'missing') throw new WorkflowNotFoundError('not found', id, undefined);
          return { status: { name: c.status }, taskQueue: c.taskQueue };
        },
      }),
      async start(
        _wf: unknown,
        o: { workflowId: string; taskQueue: string; workflowIdReusePolicy: unknown; args: unknown[] },
      ) {
        if (state.down) throw unavailable();
        if (running.has(o.workflowId))
          throw new WorkflowExecutionAlreadyStartedError(
            'already started',
            o.workflowId,
            'ingestionWorkflow',
          );
        running.add(o.workflowId);
        starts.push({
          workflowId: o.workflowId,
          taskQueue: o.taskQueue,
          reuse: o.workflowIdReusePolicy,
          args: o.args,
        });
        return {};
      },
    },
  };
  return { client: client as unknown as Client, starts, running, state };
}

function recordingLog() {
  const lines: { level: string; msg: string }[] = [];
  const log: ReconcileLog = {
    info: (_o, msg) => lines.push({ level: 'info', msg }),
    warn: (_o, msg) => lines.push({ level: 'warn', msg }),
    debug: (_o, msg) => lines.push({ level: 'debug', msg }),
  };
  return { log, lines };
}

describe('BatchReconciler', () => {
  it('starts the stale batches of campaigns run on its task queue, under their ids, and skips the rest', async () => {
    const { db, graces } = fakeDb([
      { campaignId: 'mine', step: 3, batchId: 'a' },
      { campaignId: 'mine', step: 4, batchId: 'b' },
      { campaignId: 'gone', step: 1, batchId: 'x' },
      { campaignId: 'done', step: 1, batchId: 'y' },
      { campaignId: 'theirs', step: 1, batchId: 'z' },
    ]);
    const t = fakeTemporal({
      mine: { status: 'RUNNING', taskQueue: QUEUE },
      gone: 'missing',
      done: { status: 'COMPLETED', taskQueue: QUEUE },
      theirs: { status: 'RUNNING', taskQueue: 'other-q' },
    });
    t.running.add('ingest-mine-4-b'); // its ingestion runs (e.g. Kafka is away): left alone
    const r = new BatchReconciler({
      db,
      temporal: t.client,
      taskQueue: QUEUE,
      rewardsTopic: 'topic-1',
      graceMs: 45_000,
    });
    const out = await r.tick();
    expect(t.starts).toEqual([
      {
        workflowId: 'ingest-mine-3-a',
        taskQueue: QUEUE,
        reuse: WorkflowIdReusePolicy.ALLOW_DUPLICATE_FAILED_ONLY,
        args: [{ claimId: 'claim-mine-3-a', topic: 'topic-1' }],
      },
    ]);
    expect(out.started.map((b) => b.workflowId)).toEqual(['ingest-mine-3-a']);
    expect(out.running).toBe(1);
    expect(out.skipped).toEqual([
      { campaignId: 'gone', reason: 'it has no campaign workflow' },
      { campaignId: 'done', reason: 'its campaign workflow is completed' },
      { campaignId: 'theirs', reason: `its campaign workflow runs on task queue other-q, not ${QUEUE}` },
    ]);
    expect(new Set(graces)).toEqual(new Set([45]));

    // Again: nothing new is started; the campaigns left alone are not asked about again soon.
    const again = await r.tick();
    expect(again.started).toEqual([]);
    expect(again.running).toBe(2);
    expect(t.starts).toHaveLength(1);
  });

  it('starts at most maxPerTick workflows a tick and only the campaigns it is given', async () => {
    const rows = [1, 2, 3, 4, 5].map((step) => ({ campaignId: 'c1', step, batchId: 'b' }));
    rows.push({ campaignId: 'c2', step: 1, batchId: 'b' });
    const { db } = fakeDb(rows);
    const t = fakeTemporal({
      c1: { status: 'RUNNING', taskQueue: QUEUE },
      c2: { status: 'RUNNING', taskQueue: QUEUE },
    });
    const r = new BatchReconciler({
      db,
      temporal: t.client,
      taskQueue: QUEUE,
      maxPerTick: 3,
      campaigns: ['c1'],
    });
    expect((await r.tick()).started.map((b) => b.step)).toEqual([1, 2, 3]);
    rows.splice(0, 3); // their workflows published them
    expect((await r.tick()).started.map((b) => b.step)).toEqual([4, 5]);
    expect(t.starts.every((s) => s.workflowId.startsWith('ingest-c1-'))).toBe(true);
  });

  it('rides out PostgreSQL and then Temporal being away, logging once, and publishes once both answer', async () => {
    const { db, state: pgState } = fakeDb([{ campaignId: 'c', step: 1, batchId: 'b' }], { down: true });
    const t = fakeTemporal({ c: { status: 'RUNNING', taskQueue: QUEUE } }, { down: true });
    const { log, lines } = recordingLog();
    const r = new BatchReconciler({
      db,
      temporal: t.client,
      taskQueue: QUEUE,
      intervalMs: 2,
      graceMs: 0,
      log,
    });
    await expect(r.tick()).rejects.toThrow(/ECONNREFUSED/);
    r.start();
    try {
      await waitUntil(() => r.failures >= 3, { what: 'three ticks failing on PostgreSQL' });
      pgState.down = false;
      const failures = r.failures;
      await waitUntil(() => r.failures >= failures + 2, { what: 'two more ticks failing on Temporal' });
      expect(t.starts).toEqual([]);
      t.state.down = false;
      await waitUntil(() => t.starts.length === 1 && r.failures === 0, {
        what: 'the batch started once both answer',
        timeoutMs: 10_000,
      });
    } finally {
      await r.stop();
    }
    expect(t.starts[0]!.workflowId).toBe('ingest-c-1-b');
    expect(lines.filter((l) => l.level === 'warn')).toHaveLength(1);
    expect(lines.filter((l) => l.level === 'info').map((l) => l.msg)).toEqual([
      'batch reconciler: started the ingestion of an accepted batch left unpublished',
      'batch reconciler: PostgreSQL and Temporal answer again',
    ]);
  });

  it('waits longer after each failed tick, up to a cap', () => {
    const { db } = fakeDb([]);
    const r = new BatchReconciler({
      db,
      temporal: fakeTemporal({}).client,
      taskQueue: QUEUE,
      intervalMs: 1000,
    });
    expect(r.nextDelayMs()).toBe(1000);
    r.failures = 1;
    expect(r.nextDelayMs()).toBeGreaterThanOrEqual(750);
    expect(r.nextDelayMs()).toBeLessThanOrEqual(1250);
    r.failures = 3;
    expect(r.nextDelayMs()).toBeGreaterThanOrEqual(3000);
    expect(r.nextDelayMs()).toBeLessThanOrEqual(5000);
    r.failures = 50;
    expect(r.nextDelayMs()).toBeGreaterThanOrEqual(45_000);
    expect(r.nextDelayMs()).toBeLessThanOrEqual(75_000);
  });

  it('stop() cancels a Temporal call in flight and ends the ticks', async () => {
    const { db } = fakeDb([{ campaignId: 'c', step: 1, batchId: 'b' }]);
    let calls = 0;
    let signal: AbortSignal | undefined;
    const client = {
      withAbortSignal: (s: AbortSignal, fn: () => Promise<unknown>) => {
        signal = s;
        return fn();
      },
      withDeadline: (_d: number, fn: () => Promise<unknown>) => fn(),
      workflow: {
        getHandle: () => ({
          describe: () => {
            calls++;
            // Hangs like a call to an unresponsive server until it is cancelled.
            return new Promise((_, reject) =>
              signal!.addEventListener('abort', () => reject(new Error('CANCELLED'))),
            );
          },
        }),
      },
    } as unknown as Client;
    const r = new BatchReconciler({ db, temporal: client, taskQueue: QUEUE, intervalMs: 1, graceMs: 0 });
    r.start();
    await waitUntil(() => calls === 1, { what: 'a describe in flight' });
    await r.stop();
    expect(signal!.aborted).toBe(true);
    await staysFalse(() => calls > 1, 100, { what: 'a tick after stop()' });
  });
});
