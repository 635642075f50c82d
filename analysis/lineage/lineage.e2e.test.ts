// `rods lineage` and `rods export` against a real small campaign: the loop harness (real
// aggregator, worker, campaign workflow, simulated trainer) with the stand-in generator runs
// until a synthesized task is injected; then the CLI (spawned, as a user runs it) is checked
// against the event store and the projections.
import { spawn } from 'node:child_process';
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { bundleWorkflowCode, Runtime, type WorkflowBundleWithSourceMap } from '@temporalio/worker';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { LoopHarness } from '../../dev/harness/loop.js';
import {
  type StandinProcess,
  standinEndpoints,
  standinGenerator,
  startStandin,
} from '../../dev/harness/standin.js';
import { statsOfStepEntry } from '../../domain/task-stats.js';
import { EVENT_COLUMNS, type EventRow, toEvents } from '../../platform/store/events/event-store.js';
import { taskStepHistory } from '../../platform/store/events/task-steps.js';
import { executeUpdateWithRetry, installWorkerRuntime } from '../../platform/temporal/connect.js';
import { ROOT } from '../../test/support/sources.js';
import { type Lineage, LineageIndex, type LineageNode } from './model.js';
import type { LineageStats } from './stats.js';
import { loadLineageIndex } from './store.js';

let bundle: WorkflowBundleWithSourceMap;
let standin: StandinProcess;
let loop: LoopHarness;
let tmp: string;
let injectedTask: string;

function rods(args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [path.join(ROOT, 'bin/rods.mjs'), ...args], {
      cwd: ROOT,
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d) => {
      stdout += d;
    });
    child.stderr.on('data', (d) => {
      stderr += d;
    });
    child.on('error', reject);
    child.on('close', (code) => resolve({ code: code ?? -1, stdout, stderr }));
  });
}

/** RFC 4180 CSV (quoted fields may hold commas, quotes and newlines). */
function parseCsv(text: string): string[][] {
  const rows: string[][] = [];
  let row: string[] = [];
  let cell = '';
  let quoted = false;
  for (let i = 0; i < text.length; i++) {
    const ch = text[i]!;
    if (quoted) {
      if (ch === '"' && text[i + 1] === '"') {
        cell += '"';
        i++;
      } else if (ch === '"') quoted = false;
      else cell += ch;
    } else if (ch === '"') quoted = true;
    else if (ch === ',') {
      row.push(cell);
      cell = '';
    } else if (ch === '\n') {
      row.push(cell);
      rows.push(row);
      row = [];
      cell = '';
    } else cell += ch;
  }
  if (cell !== '' || row.length > 0) {
    row.push(cell);
    rows.push(row);
  }
  return rows;
}

const jsonl = (file: string) =>
  readFileSync(file, 'utf8')
    .split('\n')
    .filter((l) => l !== '')
    .map((l) => JSON.parse(l) as Record<string, unknown>);

async function eventCounts(): Promise<Map<string, number>> {
  const { rows } = await loop.pool.query<{ type: string; n: number }>(
    `select type, count(*)::int as n from events where payload->>'campaignId' = $1 group by type`,
    [loop.campaignId],
  );
  return new Map(rows.map((r) => [r.type, r.n]));
}

async function projectionCount(table: string): Promise<number> {
  const { rows } = await loop.pool.query<{ n: number }>(
    `select count(*)::int as n from ${table} where campaign_id = $1`,
    [loop.campaignId],
  );
  return rows[0]!.n;
}

beforeAll(async () => {
  tmp = mkdtempSync(path.join(os.tmpdir(), 'rods-lineage-'));
  await installWorkerRuntime('WARN');
  bundle = await bundleWorkflowCode({
    logger: Runtime.instance().logger,
    workflowsPath: fileURLToPath(new URL('../../workflows/index.ts', import.meta.url)),
  });
  standin = await startStandin(['--seed', '7']);
  loop = new LoopHarness({
    endpoints: standinEndpoints(standin.url),
    workflowBundle: bundle,
    config: {
      seeds: { perCategory: 3 },
      detector: { low: 0.2, high: 0.85 },
      selection: {
        budgetPerStep: 4,
        perCategoryQuota: { base: 1, miss_func: 1, miss_param: 1, long_context: 1 },
        cooldownSteps: 1,
        maxConcurrentSyntheses: 4,
      },
      pool: { injectionCadence: 'steps:2' },
      generator: standinGenerator(),
    },
  });
  await loop.start();
  // Train until a synthesized task is injected, then one more step (so it is observed).
  let injectedAt = 0;
  for (let step = 1; step <= 12; step++) {
    await loop.trainStep(step);
    await loop.waitPlanned(step);
    await loop.waitSynthesesDone();
    if (injectedAt > 0) break;
    const n = await loop.pool.query<{ n: number }>(
      `select count(*)::int as n from events where type = 'TaskInjected' and payload->>'campaignId' = $1`,
      [loop.campaignId],
    );
    if (n.rows[0]!.n > 0) injectedAt = step;
  }
  expect(injectedAt).toBeGreaterThan(0);
  const h = loop.client.workflow.getHandle(loop.workflowId);
  await executeUpdateWithRetry(h as never, 'stop', [{ reason: 'lineage test' }]);
  await h.result();
  const r = await loop.pool.query<{ task_id: string }>(
    `select payload->>'taskId' as task_id from events
      where type = 'TaskInjected' and payload->>'campaignId' = $1 order by position limit 1`,
    [loop.campaignId],
  );
  injectedTask = r.rows[0]!.task_id;
}, 600_000);

afterAll(async () => {
  await loop?.close();
  await standin?.stop();
  if (tmp) rmSync(tmp, { recursive: true, force: true });
});

describe('rods lineage', () => {
  it('traces an injected task to its human seed with models, prompt hashes and the judge verdict', async () => {
    const r = await rods(['lineage', injectedTask, '--campaign', loop.campaignId, '--format', 'json']);
    expect(r.stderr).toBe('');
    expect(r.code).toBe(0);
    const l = JSON.parse(r.stdout) as Lineage;
    expect(l.taskId).toBe(injectedTask);
    expect(l.complete).toBe(true);

    // Walk to the end of the chain: a human seed, registered by a TaskSeeded event.
    let n: LineageNode = l.root;
    const chain: LineageNode[] = [n];
    while (n.parents.length > 0) {
      n = n.parents[0]!;
      chain.push(n);
    }
    expect(n.origin).toBe('seed');
    expect(n.derivation).toBeNull();
    expect(n.depth).toBe(0);
    const seeded = await loop.pool.query(
      `select 1 from events where type = 'TaskSeeded' and payload->>'campaignId' = $1 and payload->>'taskId' = $2`,
      [loop.campaignId, n.taskId],
    );
    expect(seeded.rowCount).toBe(1);
    expect(l.root.rootSeedId).toBe(n.taskId);
    // The seed's band changes are its entries in the aggregator's per-step records whose band
    // before differs (the loop is shorter than the default window, so every step is read).
    const bands = await loop.pool.query<{ step: number; from: string | null; to: string }>(
      `select step, "from", "to" from (
         select (e.payload->>'step')::int as step, e.payload->'tasks'->'bandBefore'->>(t.i::int - 1) as "from",
                e.payload->'tasks'->'band'->>(t.i::int - 1) as "to"
           from events e, jsonb_array_elements_text(e.payload->'tasks'->'taskId') with ordinality t(id, i)
          where e.type = 'StepStatsRecorded' and e.payload->>'campaignId' = $1 and t.id = $2) x
        where "from" is distinct from "to" order by step`,
      [loop.campaignId, n.taskId],
    );
    expect(bands.rows.length).toBeGreaterThan(0);
    expect(n.life.bandChanges.map((b) => ({ step: b.step, from: b.from, to: b.to }))).toEqual(bands.rows);
    expect(l.bandWindow).toEqual({ from: 0, to: expect.any(Number) });
    expect(n.life.seeded).not.toBeNull();
    expect(l.root.depth).toBe(chain.length - 1);

    // The derivation of the injected task: synthesis, stages, judge, triggering statistics.
    const d = l.root.derivation!;
    expect(d).not.toBeNull();
    expect(l.root.origin).toBe('generated');
    expect(l.root.life.injected).not.toBeNull();
    expect(d.parents[0]).toBe(chain[1]!.taskId);
    expect(d.synthesisId).toMatch(/^synth:/);
    expect(d.judge.verdict).toBe('accept');
    expect(d.judge.model).toBe('rods-standin-generator');
    expect(Object.keys(d.judge.scores).length).toBeGreaterThan(0);
    expect(d.selection).not.toBeNull();
    expect(d.triggeringStats).toMatchObject({ band: 'boundary' });
    expect(d.step).toBe(d.selection!.step);
    // The simulated trainer names its policy versions sim-<step>; the seed was last seen at or before the selection.
    expect(d.policyVersion).toMatch(/^sim-\d+$/);
    expect(Number(d.policyVersion!.slice(4))).toBeLessThanOrEqual(d.step!);
    // Every StageCompleted of the synthesis stream, with models and prompt hashes for the LLM stages.
    const stages = await loop.pool.query<{ payload: { stage: string; promptVersionHash: string | null } }>(
      `select payload from events where stream_id = $1 and type = 'StageCompleted' order by stream_version`,
      [`synthesis-${d.synthesisId}`],
    );
    expect(d.stages.length).toBe(stages.rows.length);
    expect(d.stages.map((s) => s.stage)).toEqual(stages.rows.map((s) => s.payload.stage));
    const plan = d.stages.find((s) => s.stage === 'plan')!;
    expect(plan.model).toBe('rods-standin-generator');
    expect(plan.promptVersionHash).toMatch(/^[0-9a-f]{64}$/);
    expect(d.promptVersions.plan).toBe(plan.promptVersionHash);
    expect(d.models.plan).toBe('rods-standin-generator');
    expect(Object.keys(d.stageOutputs).length).toBeGreaterThan(0);
  });

  it('reads the same lineage of every task as an index of the whole campaign gives', async () => {
    // The reference: every event of the campaign, and the per-step records' band changes of every
    // task it knows (the window a lookup reads).
    const { rows } = await loop.pool.query<EventRow>(
      `select ${EVENT_COLUMNS} from events where payload->>'campaignId' = $1 order by transaction_id, position`,
      [loop.campaignId],
    );
    const whole = new LineageIndex(
      loop.campaignId,
      toEvents(rows).map((e) => ({
        ...e,
        payload: e.payload as Record<string, unknown>,
        metadata: e.metadata as Record<string, unknown>,
      })),
    );
    const tasks = [...new Set([...whole.poolTasks(), ...whole.validated.keys()])];
    const recorded = await taskStepHistory(loop.pool, loop.campaignId, tasks);
    whole.addBandChanges(
      recorded.entries
        .filter((e) => e.bandBefore !== e.band)
        .map((e) => ({
          taskId: e.taskId,
          from: e.bandBefore,
          to: e.band,
          step: e.step,
          stats: statsOfStepEntry(e),
        })),
      recorded.window!,
    );
    expect(tasks).toContain(injectedTask);
    expect(tasks.some((t) => whole.lineage(t)!.root.origin === 'generated')).toBe(true);
    for (const t of [...tasks, 'no-such-task']) {
      const index = await loadLineageIndex(loop.pool, loop.campaignId, t);
      expect(index.lineage(t), t).toEqual(whole.lineage(t));
    }
  });

  it('renders every format', async () => {
    const args = ['lineage', injectedTask, '--campaign', loop.campaignId];
    const tree = await rods([...args, '--format', 'tree']);
    expect(tree.code).toBe(0);
    expect(tree.stdout).toContain(`lineage of ${injectedTask}`);
    expect(tree.stdout).toContain('human seed');
    expect(tree.stdout).toContain('judge: accept');
    const dot = await rods([...args, '--format', 'dot']);
    expect(dot.code).toBe(0);
    expect(dot.stdout.startsWith('digraph')).toBe(true);
    expect(dot.stdout.trim().endsWith('}')).toBe(true);
    expect(dot.stdout).toContain('->');
    const mermaid = await rods([...args, '--format', 'mermaid']);
    expect(mermaid.code).toBe(0);
    expect(mermaid.stdout.startsWith('graph TD')).toBe(true);
    expect(mermaid.stdout).toContain('-->');
    // Without --campaign the task's campaign is found from the event store (earlier runs with the
    // same stand-in seed may hold the same task id: then the CLI asks for --campaign).
    const holders = await loop.pool.query<{ c: string }>(
      `select distinct payload->>'campaignId' as c from events
        where type in ('TaskSeeded', 'TaskInjected') and payload->>'taskId' = $1`,
      [injectedTask],
    );
    const json = await rods(['lineage', injectedTask, '--json']);
    if (holders.rows.length === 1) {
      expect(json.code).toBe(0);
      expect((JSON.parse(json.stdout) as Lineage).campaignId).toBe(loop.campaignId);
    } else {
      expect(json.code).toBe(2);
      expect(json.stderr).toMatch(/several campaigns.*--campaign/);
    }
  });

  it('summarises by generation, adding up to the pool', async () => {
    const r = await rods(['lineage', '--campaign', loop.campaignId, '--stats', '--json']);
    expect(r.code).toBe(0);
    const s = JSON.parse(r.stdout) as LineageStats;
    const sum = (f: (g: LineageStats['generations'][number]) => number) =>
      s.generations.reduce((a, g) => a + f(g), 0);
    const members = await loop.pool.query<{ n: number; active: number; pruned: number; generated: number }>(
      `select count(*)::int as n, count(*) filter (where active)::int as active,
              count(*) filter (where removed_rule = 'pruned')::int as pruned,
              count(*) filter (where origin = 'generated')::int as generated
         from pool_members where campaign_id = $1`,
      [loop.campaignId],
    );
    const m = members.rows[0]!;
    expect(sum((g) => g.tasks)).toBe(m.n);
    expect(s.tasks).toBe(m.n);
    expect(sum((g) => g.active)).toBe(m.active);
    expect(sum((g) => g.pruned)).toBe(m.pruned);
    expect(sum((g) => g.active + g.retired + g.pruned)).toBe(m.n);
    expect(sum((g) => g.injected)).toBe(m.generated);
    expect(s.generations[0]!.depth).toBe(0);
    expect(s.generations[0]!.injected).toBe(0);
    // Every generated task is the child of exactly one earlier-generation task.
    expect(sum((g) => g.children)).toBe(m.generated);
    for (const g of s.generations) expect(g.survivalShare).toBeCloseTo(g.active / g.tasks, 12);
  });

  it('refuses an unknown task or campaign with exit 2', async () => {
    const task = await rods(['lineage', 'no-such-task', '--campaign', loop.campaignId]);
    expect(task.code).toBe(2);
    expect(task.stderr).toMatch(/unknown task "no-such-task"/);
    const anywhere = await rods(['lineage', 'no-such-task']);
    expect(anywhere.code).toBe(2);
    const campaign = await rods(['lineage', injectedTask, '--campaign', 'no-such-campaign']);
    expect(campaign.code).toBe(2);
    expect(campaign.stderr).toMatch(/unknown campaign/);
    const stats = await rods(['lineage', '--campaign', 'no-such-campaign', '--stats', '--json']);
    expect(stats.code).toBe(2);
    const format = await rods(['lineage', injectedTask, '--format', 'svg']);
    expect(format.code).toBe(2);
  });
});

describe('rods export', () => {
  it('writes one JSONL file per event type and projection with the store row counts', async () => {
    const out = path.join(tmp, 'jsonl');
    const r = await rods(['export', '--campaign', loop.campaignId, '--format', 'jsonl', '--out', out]);
    expect(r.stderr).toBe('');
    expect(r.code).toBe(0);
    const counts = await eventCounts();
    expect(readdirSync(path.join(out, 'events')).sort()).toEqual(
      [...counts.keys()].map((t) => `${t}.jsonl`).sort(),
    );
    for (const [type, n] of counts) {
      const rows = jsonl(path.join(out, 'events', `${type}.jsonl`));
      expect(rows.length, type).toBe(n);
      expect(
        rows.every(
          (x) => x.type === type && (x.payload as { campaignId: string }).campaignId === loop.campaignId,
        ),
      ).toBe(true);
    }
    for (const table of ['task_stats', 'pool_members', 'candidates', 'steps']) {
      const rows = jsonl(path.join(out, 'projections', `${table}.jsonl`));
      expect(rows.length, table).toBe(await projectionCount(table));
    }
    const manifest = JSON.parse(readFileSync(path.join(out, 'manifest.json'), 'utf8')) as {
      files: { file: string; rows: number }[];
    };
    expect(manifest.files.length).toBe(counts.size + 4);
    expect(readdirSync(tmp).filter((f) => f.includes('.tmp-'))).toEqual([]);
  });

  it('writes CSV with a header and nested values as JSON strings', async () => {
    const out = path.join(tmp, 'csv');
    const r = await rods(['export', '--campaign', loop.campaignId, '--format', 'csv', '--out', out]);
    expect(r.code).toBe(0);
    const counts = await eventCounts();
    for (const [type, n] of counts) {
      const rows = parseCsv(readFileSync(path.join(out, 'events', `${type}.csv`), 'utf8'));
      const header = rows[0]!;
      expect(header.slice(0, 2)).toEqual(['position', 'transaction_id']);
      expect(rows.length - 1, type).toBe(n);
      for (const row of rows.slice(1)) expect(row.length).toBe(header.length);
    }
    const injected = parseCsv(readFileSync(path.join(out, 'events', 'TaskInjected.csv'), 'utf8'));
    const col = injected[0]!.indexOf('payload.parents');
    expect(col).toBeGreaterThan(0);
    expect(Array.isArray(JSON.parse(injected[1]![col]!))).toBe(true);
    for (const table of ['task_stats', 'pool_members', 'candidates', 'steps']) {
      const rows = parseCsv(readFileSync(path.join(out, 'projections', `${table}.csv`), 'utf8'));
      expect(rows[0]).toContain('campaign_id');
      expect(rows.length - 1, table).toBe(await projectionCount(table));
    }
    const members = parseCsv(readFileSync(path.join(out, 'projections', 'pool_members.csv'), 'utf8'));
    const taskCol = members[0]!.indexOf('task');
    expect(JSON.parse(members[1]![taskCol]!)).toHaveProperty('ground_truth');
  });

  it('writes one OpenLineage RunEvent per synthesis run', async () => {
    const out = path.join(tmp, 'openlineage');
    const r = await rods(['export', '--campaign', loop.campaignId, '--format', 'openlineage', '--out', out]);
    expect(r.code).toBe(0);
    const events = jsonl(path.join(out, 'openlineage.jsonl')) as {
      eventType: string;
      eventTime: string;
      run: { runId: string; facets: Record<string, { synthesisId?: string }> };
      job: { namespace: string; name: string };
      inputs: { namespace: string; name: string }[];
      outputs: { namespace: string; name: string }[];
      producer: string;
      schemaURL: string;
    }[];
    const counts = await eventCounts();
    const outcomes = await loop.pool.query<{
      sid: string;
      type: string;
      seed: string;
      candidate: string | null;
    }>(
      `select payload->>'synthesisId' as sid, type, payload->>'seedTaskId' as seed, payload->>'candidateId' as candidate
         from events where payload->>'campaignId' = $1 and type in ('CandidateValidated', 'CandidateRejected')
          and stream_id = 'synthesis-' || (payload->>'synthesisId')`,
      [loop.campaignId],
    );
    const bySid = new Map(outcomes.rows.map((o) => [o.sid, o]));
    // One run per SynthesisStarted, and one per Augment variant (its stream has none).
    const variant = /~(miss_func|miss_param)$/;
    const variants = outcomes.rows.filter((o) => variant.test(o.sid)).length;
    expect(events.length).toBe((counts.get('SynthesisStarted') ?? 0) + variants);
    const namespace = `rods://${loop.campaignId}`;
    const runIds = new Set<string>();
    for (const e of events) {
      expect(['COMPLETE', 'FAIL']).toContain(e.eventType);
      expect(Number.isNaN(Date.parse(e.eventTime))).toBe(false);
      expect(e.run.runId).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/);
      runIds.add(e.run.runId);
      expect(e.job.namespace).toBe(namespace);
      expect(typeof e.job.name).toBe('string');
      expect(e.producer).toMatch(/^https?:\/\//);
      expect(e.schemaURL).toBe('https://openlineage.io/spec/2-0-2/OpenLineage.json#/$defs/RunEvent');
      expect(Array.isArray(e.inputs) && Array.isArray(e.outputs)).toBe(true);
      const sid = e.run.facets.rods_synthesis!.synthesisId!;
      const o = bySid.get(sid)!;
      expect(e.eventType).toBe(o.type === 'CandidateValidated' ? 'COMPLETE' : 'FAIL');
      // a variant's input is its base candidate
      const input = variant.test(sid) ? bySid.get(sid.replace(variant, ''))!.candidate : o.seed;
      expect(e.inputs).toEqual([expect.objectContaining({ namespace, name: input })]);
      if (o.type === 'CandidateValidated')
        expect(e.outputs).toEqual([expect.objectContaining({ namespace, name: o.candidate })]);
    }
    expect(runIds.size).toBe(events.length);
    expect(events.some((e) => e.eventType === 'COMPLETE')).toBe(true);
  });

  it('refuses an existing output folder or an unknown campaign with exit 2 and writes nothing', async () => {
    const out = path.join(tmp, 'existing');
    mkdirSync(out);
    writeFileSync(path.join(out, 'keep.txt'), 'mine');
    const before = readdirSync(tmp).sort();
    const r = await rods(['export', '--campaign', loop.campaignId, '--format', 'csv', '--out', out]);
    expect(r.code).toBe(2);
    expect(r.stderr).toMatch(/already exists/);
    expect(readdirSync(out)).toEqual(['keep.txt']);
    expect(readFileSync(path.join(out, 'keep.txt'), 'utf8')).toBe('mine');
    expect(readdirSync(tmp).sort()).toEqual(before);

    const unknown = await rods([
      'export',
      '--campaign',
      'no-such-campaign',
      '--out',
      path.join(tmp, 'unknown'),
    ]);
    expect(unknown.code).toBe(2);
    expect(unknown.stderr).toMatch(/unknown campaign/);
    expect(readdirSync(tmp).sort()).toEqual(before);
    const format = await rods([
      'export',
      '--campaign',
      loop.campaignId,
      '--format',
      'xml',
      '--out',
      path.join(tmp, 'x'),
    ]);
    expect(format.code).toBe(2);
    expect(readdirSync(tmp).sort()).toEqual(before);
  });
});
