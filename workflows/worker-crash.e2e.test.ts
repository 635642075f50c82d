// A rods worker process killed with SIGKILL during synthesis, 5 times: every validated candidate
// must be injected exactly once and no workflow may be left stuck.
import { type ChildProcess, spawn } from 'node:child_process';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { bundleWorkflowCode, Runtime, type WorkflowBundleWithSourceMap } from '@temporalio/worker';
import type { QueryResultRow } from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { LoopHarness } from '../dev/harness/loop.js';
import {
  type StandinProcess,
  standinEndpointEnv,
  standinGenerator,
  startStandin,
} from '../dev/harness/standin.js';
import type { Pool } from '../platform/store/db.js';
import { installWorkerRuntime } from '../platform/temporal/connect.js';
import { ROOT } from '../test/support/sources.js';
import { waitUntil } from '../test/support/wait.js';

let bundle: WorkflowBundleWithSourceMap;
let standin: StandinProcess;
let loop: LoopHarness;
const workers = new Set<ChildProcess>();

function startWorker(taskQueue: string): ChildProcess {
  const child = spawn(
    process.execPath,
    [path.join(ROOT, 'bin/rods.mjs'), 'worker', '--task-queue', taskQueue, '--sink-dir', '.stack/test-sink'],
    {
      cwd: ROOT,
      // The stand-in is the worker's own endpoint, not the campaign's.
      env: { ...process.env, ...standinEndpointEnv(standin.url) },
      stdio: ['ignore', 'ignore', 'ignore'],
    },
  );
  workers.add(child);
  child.once('exit', () => workers.delete(child));
  return child;
}

function kill9(child: ChildProcess): Promise<void> {
  return new Promise((resolve) => {
    if (child.exitCode !== null || child.signalCode !== null) return resolve();
    child.once('exit', () => resolve());
    child.kill('SIGKILL');
  });
}

const OUTCOMES = `('CandidateValidated', 'CandidateRejected')`;

/**
 * A synthesis of the campaign that recorded a stage after `after` and has no outcome yet. Only
 * stages that a generator call always follows count (execute: rewrite; rewrite: the judge), so
 * the synthesis is still busy when the kill lands.
 */
async function stageOfUnfinishedSynthesis(db: Pool, campaignId: string, after: number) {
  const { rows } = await db.query<{ synthesis_id: string }>(
    `select s.payload->>'synthesisId' as synthesis_id from events s
      where s.payload->>'campaignId' = $1 and s.type = 'StageCompleted' and s.position > $2
        and s.payload->>'stage' in ('execute', 'rewrite')
        and not exists (select 1 from events o
                         where o.payload->>'campaignId' = $1 and o.type in ${OUTCOMES}
                           and o.payload->>'synthesisId' = s.payload->>'synthesisId')
      order by s.position limit 1`,
    [campaignId, after],
  );
  return rows[0]?.synthesis_id;
}

async function synthesisEnded(db: Pool, campaignId: string, synthesisId: string): Promise<boolean> {
  const { rowCount } = await db.query(
    `select 1 from events where payload->>'campaignId' = $1 and type in ${OUTCOMES}
        and payload->>'synthesisId' = $2`,
    [campaignId, synthesisId],
  );
  return (rowCount ?? 0) > 0;
}

async function lastPosition(db: Pool, campaignId: string): Promise<number> {
  const { rows } = await db.query<{ p: string | null }>(
    `select max(position)::text as p from events where payload->>'campaignId' = $1`,
    [campaignId],
  );
  return Number(rows[0]?.p ?? 0);
}

beforeAll(async () => {
  await installWorkerRuntime('WARN');
  bundle = await bundleWorkflowCode({
    logger: Runtime.instance().logger,
    workflowsPath: fileURLToPath(new URL('./index.ts', import.meta.url)),
  });
  // Slow answers keep syntheses in flight long enough for the kills to land inside them.
  standin = await startStandin(['--seed', '5', '--latency-ms', '150']);
}, 180_000);

afterAll(async () => {
  for (const w of workers) await kill9(w);
  await loop?.close();
  await standin?.stop();
});

describe('worker crashes during synthesis', () => {
  it('5 kill -9 of the worker: every validated candidate is injected exactly once and nothing is stuck', async () => {
    loop = new LoopHarness({
      workflowBundle: bundle,
      worker: false,
      config: {
        seeds: { perCategory: 4 },
        selection: {
          budgetPerStep: 4,
          perCategoryQuota: { base: 1, miss_func: 1, miss_param: 1, long_context: 1 },
          cooldownSteps: 0,
          maxConcurrentSyntheses: 4,
        },
        pool: { injectionCadence: 'steps:2', injectionShare: 1 },
        generator: standinGenerator(),
      },
    });
    let worker = startWorker(loop.taskQueue);
    await loop.start();

    let kills = 0;
    let killedMidSynthesis = 0;
    // Events of this campaign up to the last kill; the next kill waits for a stage recorded after it.
    let seen = 0;
    for (let step = 1; step <= 6; step++) {
      await loop.trainStep(step);
      await loop.waitPlanned(step, 240_000);
      if (kills < 5 && step <= 5) {
        // With syntheses in flight, kill right after one of them recorded a stage (by the worker
        // now running), so the kill lands inside a synthesis, between two of its stages.
        const inFlight = Object.keys((await loop.status()).running).length > 0;
        const target = inFlight
          ? await waitUntil(() => stageOfUnfinishedSynthesis(loop.pool, loop.campaignId, seen), {
              what: `a stage of a running synthesis recorded after position ${seen}`,
              timeoutMs: 240_000,
            })
          : undefined;
        await kill9(worker);
        kills++;
        // The worker is dead, so no outcome is recorded after the kill: none now means in flight.
        if (target && !(await synthesisEnded(loop.pool, loop.campaignId, target))) killedMidSynthesis++;
        seen = await lastPosition(loop.pool, loop.campaignId);
        worker = startWorker(loop.taskQueue);
      }
    }
    expect(kills).toBe(5);
    expect(killedMidSynthesis).toBeGreaterThanOrEqual(3);
    await loop.waitSynthesesDone(300_000);
    // Two more steps reach an injection boundary with the last candidates queued.
    for (let step = 7; step <= 8; step++) {
      await loop.trainStep(step);
      await loop.waitPlanned(step, 240_000);
    }
    await loop.waitSynthesesDone(300_000);

    const q = async <T extends QueryResultRow>(sql: string) =>
      (await loop.pool.query<T>(sql, [loop.campaignId])).rows;
    const validated = await q<{ id: string }>(
      `select payload->>'candidateId' as id from events where type = 'CandidateValidated' and payload->>'campaignId' = $1`,
    );
    const injected = await q<{ id: string; n: number }>(
      `select payload->>'candidateId' as id, count(*)::int as n from events
        where type = 'TaskInjected' and payload->>'campaignId' = $1 group by 1`,
    );
    const queued = await q<{ candidate_id: string }>(
      `select candidate_id from candidates where campaign_id = $1 and status = 'validated'`,
    );
    expect(validated.length).toBeGreaterThan(0);
    // Exactly once: no candidate injected twice, and every validated one injected (or still
    // queued for the next boundary, which the last steps rule out for all but the newest).
    expect(injected.every((r) => r.n === 1)).toBe(true);
    const injectedIds = new Set(injected.map((r) => r.id));
    const waiting = new Set(queued.map((r) => r.candidate_id));
    for (const v of validated) expect(injectedIds.has(v.id) || waiting.has(v.id), v.id).toBe(true);
    expect(new Set(validated.map((v) => v.id)).size).toBe(validated.length);

    // Nothing stuck: every synthesis workflow completed, and the campaign is still running.
    const syntheses = await q<{ id: string }>(
      `select payload->>'synthesisId' as id from events where type = 'SynthesisStarted' and payload->>'campaignId' = $1`,
    );
    for (const s of syntheses) {
      const d = await loop.client.workflow.getHandle(s.id).describe();
      expect(d.status.name, s.id).toBe('COMPLETED');
    }
    expect((await loop.client.workflow.getHandle(loop.workflowId).describe()).status.name).toBe('RUNNING');
    await kill9(worker);
  }, 900_000);
});
