import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type ExecuteResponse, ExecutorClient } from '../../activities/executor-client.js';
import { type GeneratorConfig, generatorConfig } from '../../activities/llm/config.js';
import type { Candidate } from '../../activities/llm/schemas.js';
import {
  draftCandidate,
  generateCalls,
  judge,
  patchConfig,
  plan,
  rewrite,
  withQuestion,
} from '../../activities/llm/stages.js';
import { SEED_CATEGORIES, type SeedCategory, type TaskRecord } from '../../domain/task.js';
import { type StandinServer, startStandin } from './server.js';

// The stand-in's answers for real seeds, validated by the real environment executor: the plan →
// parameters output must execute cleanly for at least 80 % of 100 seeds per category.
const executor = new ExecutorClient();
let server: StandinServer;
let cfg: GeneratorConfig;

const run = (c: Candidate): Promise<ExecuteResponse> =>
  executor.execute({
    involved_classes: c.involved_classes,
    initial_config: c.initial_config,
    ground_truth: c.ground_truth,
    long_context: c.category === 'long_context',
  });

async function mapPool<T, R>(items: T[], limit: number, fn: (item: T) => Promise<R>): Promise<R[]> {
  const out: R[] = new Array(items.length);
  let next = 0;
  await Promise.all(
    Array.from({ length: limit }, async () => {
      while (next < items.length) {
        const i = next++;
        out[i] = await fn(items[i]!);
      }
    }),
  );
  return out;
}

async function synthesize(seed: TaskRecord, sampling = 1) {
  const p = await plan(seed, {}, cfg, { seed: sampling });
  const c = await generateCalls(p.value, seed, cfg, { seed: sampling });
  const candidate = draftCandidate(seed, c.value, { id: `standin-${seed.id}-${sampling}` });
  return { plan: p.value, candidate };
}

/** Whether the candidate's calls or state differ from the seed's (beyond choosing turns). */
function mutated(seed: TaskRecord, c: Candidate): boolean {
  const seedCalls = new Set(seed.ground_truth.flat());
  return (
    c.ground_truth.flat().some((call) => !seedCalls.has(call)) ||
    JSON.stringify(c.initial_config) !== JSON.stringify(seed.initial_config)
  );
}

beforeAll(async () => {
  server = await startStandin({ port: 0, seed: 2606 });
  cfg = generatorConfig({ baseUrl: server.url, model: 'rods-standin-generator', backoffBaseMs: 5 });
});
afterAll(async () => {
  await server?.close();
});

describe.each(SEED_CATEGORIES)('stand-in synthesis on 100 %s seeds', (category: SeedCategory) => {
  it('plan → parameters execute cleanly for at least 80 %, and most candidates differ from their seed', async () => {
    const seeds = await executor.seeds(category, 100);
    expect(seeds).toHaveLength(100);
    const results = await mapPool(seeds, 8, async (seed) => {
      const { plan: p, candidate } = await synthesize(seed);
      const r = await run(candidate);
      return { seed, plan: p, candidate, ok: r.ok, failure: r.failure };
    });
    const clean = results.filter((r) => r.ok).length;
    const changed = results.filter((r) => mutated(r.seed, r.candidate)).length;
    const turns = results.map((r) => r.candidate.ground_truth.length);
    console.log(
      `[standin] ${category}: ${clean}/100 plan→params outputs execute cleanly; ${changed}/100 renamed or varied; ` +
        `turns ${Math.min(...turns)}–${Math.max(...turns)}` +
        results
          .filter((r) => !r.ok)
          .slice(0, 5)
          .map((r) => `\n  ${r.seed.id}: ${r.failure?.call} → ${r.failure?.reason}`)
          .join(''),
    );
    expect(clean / 100).toBeGreaterThanOrEqual(0.8);
    expect(changed / 100).toBeGreaterThanOrEqual(0.5);
    for (const r of results) {
      expect(r.candidate.ground_truth.length).toBeGreaterThanOrEqual(2);
      expect(r.candidate.ground_truth.length).toBeLessThanOrEqual(5);
      for (const t of r.candidate.ground_truth) expect(t.length).toBeGreaterThanOrEqual(1);
      for (const t of r.candidate.ground_truth) expect(t.length).toBeLessThanOrEqual(3);
    }
  }, 600_000);
});

describe('stand-in pipeline on real seeds', () => {
  it('rewrites executed candidates into questions the judge accepts', async () => {
    const seeds = [...(await executor.seeds('base', 30)), ...(await executor.seeds('miss_param', 10, 30))];
    const verdicts = await mapPool(seeds, 6, async (seed) => {
      const { plan: p, candidate } = await synthesize(seed, 3);
      if (!(await run(candidate)).ok) return null;
      const w = await rewrite(candidate, cfg, { seedTask: seed, narrative: p.narrative });
      const j = await judge(withQuestion(candidate, w.value), cfg);
      return j.value.verdict;
    });
    const judged = verdicts.filter((v) => v !== null);
    const accepted = judged.filter((v) => v === 'accept').length;
    console.log(`[standin] judge accepted ${accepted}/${judged.length} rewritten candidates`);
    expect(judged.length).toBeGreaterThanOrEqual(32);
    expect(accepted / judged.length).toBeGreaterThanOrEqual(0.8);
  }, 300_000);

  it('repairs a candidate whose state lost a file the calls need (config patch)', async () => {
    const seeds = (await executor.seeds('base', 60)).filter((s) =>
      s.involved_classes.includes('GorillaFileSystem'),
    );
    let broken = 0;
    let repaired = 0;
    await mapPool(seeds, 6, async (seed) => {
      const { candidate } = await synthesize(seed, 5);
      if (!(await run(candidate)).ok) return;
      // Remove the first file a read of the ground truth needs, wherever it is in the tree.
      const needed = candidate.ground_truth
        .flat()
        .map((c) => /^(?:cat|grep|tail|wc|sort)\((?:file_name=)?'([^']+)'/.exec(c)?.[1])
        .find((n) => n !== undefined);
      if (!needed) return;
      const config = structuredClone(candidate.initial_config);
      let removed = false;
      const strip = (node: unknown) => {
        const contents = (node as { contents?: Record<string, unknown> } | null)?.contents;
        if (!contents) return;
        if (needed in contents && (contents[needed] as { type?: string }).type === 'file') {
          delete contents[needed];
          removed = true;
        }
        for (const v of Object.values(contents)) strip(v);
      };
      for (const top of Object.values((config.GorillaFileSystem?.root ?? {}) as Record<string, unknown>))
        strip(top);
      if (!removed) return;
      const damaged = { ...candidate, initial_config: config };
      const before = await run(damaged);
      if (before.ok || !before.failure || before.failure.kind !== 'execution') return;
      broken++;
      const patch = await patchConfig(damaged, before.failure, cfg, { repair: 1 });
      const after = await run({ ...damaged, initial_config: patch.value.initial_config });
      if (after.ok) repaired++;
    });
    console.log(`[standin] config patch repaired ${repaired}/${broken} candidates with a removed file`);
    expect(broken).toBeGreaterThanOrEqual(5);
    expect(repaired / broken).toBeGreaterThanOrEqual(0.8);
  }, 300_000);

  it('keeps blocklisted and excluded functions out of the plan', async () => {
    const seed = (await executor.seeds('base', 20)).find((s) =>
      s.ground_truth.flat().some((c) => c.startsWith('ls(')),
    )!;
    const p = await plan(seed, { blocklist: ['GorillaFileSystem.ls', 'mv'] }, cfg);
    const names = p.value.functions.flat().map((f) => f.name);
    expect(names).not.toContain('ls');
    expect(names).not.toContain('mv');
    for (const ex of seed.excluded_function ?? []) expect(names).not.toContain(ex);
  });
});
