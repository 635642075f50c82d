// Every task the pool delivers runs in bfcl-eval's own multi-turn executor and checker: a short
// campaign with the stand-in generator injects synthesized tasks, then executor/bfcl_harness_check.py
// runs each task of the JSONL sink and of the pool API (a perfect model: the ground truth as answer).
import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { executorPython } from '../infra/stack/executor.js';
import { paths } from '../infra/stack/paths.js';
import { activePool } from '../platform/store/pool/active.js';
import { ONE_SEED_PER_CATEGORY, standinCampaigns } from '../test/support/standin-campaign.js';
import { waitUntil } from '../test/support/wait.js';

interface Summary {
  tasks: number;
  passed: number;
  failed: { id: string; error: string }[];
}

interface Delivered {
  id: string;
  rods_task_id: string;
  category: string;
}

const sameIds = (tasks: Delivered[], ids: string[]) =>
  JSON.stringify(tasks.map((t) => t.rods_task_id).sort()) === JSON.stringify(ids);

/** Runs the harness check over a JSONL file of delivered tasks in the project venv. */
function harnessCheck(file: string): { status: number | null; summary: Summary; out: string } {
  const r = spawnSync(executorPython(), ['-m', 'executor.bfcl_harness_check', file], {
    cwd: paths.root,
    encoding: 'utf8',
    env: { ...process.env, PYTHONDONTWRITEBYTECODE: '1' },
    timeout: 300_000,
  });
  const out = `${r.stdout}${r.stderr}`;
  return { status: r.status, summary: JSON.parse(r.stdout) as Summary, out };
}

const campaigns = standinCampaigns(['--seed', '13']);
let scratch: string;

beforeAll(() => {
  scratch = mkdtempSync(path.join(tmpdir(), 'rods-bfcl-harness-'));
});

afterAll(() => {
  if (scratch) rmSync(scratch, { recursive: true, force: true });
});

describe('delivered tasks in bfcl-eval’s own harness', () => {
  it('runs every task of the sink and of the pool API, seeds and synthesized, and each one passes', async () => {
    expect(existsSync(executorPython()), `${executorPython()} is missing: run \`npm run stack:up\``).toBe(
      true,
    );
    const loop = await campaigns.start({
      seeds: { perCategory: 3 },
      detector: { low: 0.2, high: 0.85 },
      selection: { ...ONE_SEED_PER_CATEGORY, maxConcurrentSyntheses: 4 },
      pool: { injectionCadence: 'steps:2' },
    });
    const sink = path.join(paths.root, '.stack/test-sink', loop.campaignId, 'current.jsonl');
    const delivered = (): Delivered[] =>
      existsSync(sink)
        ? readFileSync(sink, 'utf8')
            .split('\n')
            .filter(Boolean)
            .map((l) => JSON.parse(l) as Delivered)
        : [];
    const synthesized = () => delivered().filter((t) => t.rods_task_id.includes('~'));

    // Train until the sink holds an injected synthesized task (injection every 2 steps).
    let step = 0;
    while (synthesized().length === 0 && step < 10) {
      step++;
      await loop.trainStep(step);
      await loop.waitPlanned(step);
      await loop.waitSynthesesDone();
    }
    expect(synthesized().length, `no synthesized task in the sink after ${step} steps`).toBeGreaterThan(0);
    // The sink is written after the pool changes: wait until it holds the active pool.
    const members = (await loop.activeMembers()).map((m) => m.task_id).sort();
    await waitUntil(() => sameIds(delivered(), members), {
      what: () => `the sink to hold the ${members.length} active tasks`,
      timeoutMs: 60_000,
      intervalMs: 200,
    });
    const tasks = delivered();
    // Every delivered id is a BFCL id of the task's own category; the rods id rides beside it.
    for (const t of tasks) expect(t.id).toMatch(new RegExp(`^multi_turn_${t.category}_\\d+$`));
    expect(new Set(tasks.map((t) => t.id)).size).toBe(tasks.length);

    const fromSink = harnessCheck(sink);
    expect(fromSink.summary.failed, fromSink.out).toEqual([]);
    expect(fromSink.status).toBe(0);
    expect(fromSink.summary.tasks).toBe(tasks.length);
    expect(fromSink.summary.passed).toBe(tasks.length);

    // Under their rods ids (as delivered before) bfcl-eval could run none of the synthesized tasks.
    const rodsIds = path.join(scratch, 'rods-ids.jsonl');
    writeFileSync(rodsIds, tasks.map((t) => `${JSON.stringify({ ...t, id: t.rods_task_id })}\n`).join(''));
    const before = harnessCheck(rodsIds);
    expect(before.status).toBe(1);
    expect(before.summary.failed.map((f) => f.id).sort()).toEqual(
      synthesized()
        .map((t) => t.rods_task_id)
        .sort(),
    );

    // The pool API's records (GET /v1/campaigns/:id/pool and /batch serve activePool's tasks).
    const api = await activePool(loop.pool, loop.campaignId);
    const apiFile = path.join(scratch, 'pool-api.jsonl');
    writeFileSync(apiFile, api.tasks.map((t) => `${JSON.stringify(t.task)}\n`).join(''));
    expect(api.tasks.filter((t) => t.origin === 'generated').length).toBeGreaterThan(0);
    const fromApi = harnessCheck(apiFile);
    expect(fromApi.summary.failed, fromApi.out).toEqual([]);
    expect(fromApi.summary.passed).toBe(api.tasks.length);
  }, 900_000);
});
