import { execFile } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { describe, expect, it } from 'vitest';
import {
  BFCL_CLASSES,
  isZeroVariance,
  makeSeedTasks,
  runExperiment,
  zeroVarianceShare,
} from './experiment.js';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));

describe('makeSeedTasks', () => {
  it('makes BFCL-like seeds: ids per category, 1–2 BFCL classes, 2–5 turns, difficulty in [0.05, 0.95]', () => {
    const seeds = makeSeedTasks(100, 1);
    expect(seeds).toHaveLength(400);
    expect(new Set(seeds.map((s) => s.taskId)).size).toBe(400);
    expect(seeds.map((s) => s.taskId)).toContain('base_17');
    expect(seeds.map((s) => s.taskId)).toContain('long_context_99');
    for (const s of seeds) {
      expect(s.taskId.startsWith(`${s.category}_`)).toBe(true);
      expect(s.classes.length).toBeGreaterThanOrEqual(1);
      expect(s.classes.length).toBeLessThanOrEqual(2);
      for (const c of s.classes) expect(BFCL_CLASSES).toContain(c);
      expect(s.turns).toBeGreaterThanOrEqual(2);
      expect(s.turns).toBeLessThanOrEqual(5);
      expect(s.difficulty).toBeGreaterThanOrEqual(0.05);
      expect(s.difficulty).toBeLessThanOrEqual(0.95);
    }
    expect(new Set(seeds.map((s) => s.turns))).toEqual(new Set([2, 3, 4, 5]));
  });
});

describe('zero-variance share', () => {
  it('counts the groups whose rewards are all equal', () => {
    const groups = [
      [1, 1, 1, 1],
      [0, 0.5, 1, 1],
      [0, 0, 0, 0],
      [0.5, 0.5, 0.5, 0.25],
      [0.25, 0.25, 0.25, 0.25],
    ];
    expect(groups.map(isZeroVariance)).toEqual([true, false, true, false, true]);
    expect(zeroVarianceShare(groups)).toBe(3 / 5);
    expect(zeroVarianceShare([])).toBe(0);
  });

  it('reports zero-variance groups over all groups of a run', () => {
    const r = runExperiment({ policies: ['static'], steps: 3, seedsPerCategory: 2, seed: 5 }).static!;
    expect(r.groups).toBe(3 * 8);
    expect(r.rollouts).toBe(3 * 8 * 16);
    expect(r.zeroVarianceShare).toBe(r.zeroVarianceGroups / r.groups);
  });
});

describe('runExperiment', () => {
  const small = { steps: 20, seedsPerCategory: 10 } as const;

  it('is deterministic for a seed, and the seed matters', () => {
    const a = runExperiment({ ...small, seed: 7 });
    const b = runExperiment({ ...small, seed: 7 });
    expect(a).toEqual(b);
    const c = runExperiment({ ...small, seed: 8 });
    expect(c.rods!.skillEnd).not.toBe(a.rods!.skillEnd);
  });

  it('static never changes its pool: every step trains on every seed', () => {
    const r = runExperiment({ ...small, policies: ['static'], seed: 3 }).static!;
    const seeds = makeSeedTasks(10, 3)
      .map((s) => s.taskId)
      .sort();
    expect(r.finalPool).toEqual(seeds);
    expect(r.groups).toBe(20 * 40);
    expect(r.generated).toBe(0);
    expect(r.selected).toBe(0);
    expect(r.retired).toEqual({ mastered: 0, burnIn: 0 });
    expect(r.skillEnd).toBeGreaterThan(r.skillStart);
  });

  it('rods injects synthesized children and retires mastered tasks', () => {
    const r = runExperiment({
      steps: 30,
      seedsPerCategory: 10,
      seed: 1,
      policies: ['rods'],
      config: { pool: { epochSteps: 5 } },
    }).rods!;
    expect(r.selected).toBeGreaterThan(0);
    expect(r.generated).toBeGreaterThan(0);
    const children = r.finalPool.filter((id) => id.includes('~s'));
    expect(children.length).toBe(r.generatedInPool);
    for (const id of children) expect(id).toMatch(/^(base|miss_func|miss_param|long_context)_\d+(~s\d+)+$/);
    expect(r.retired.mastered).toBeGreaterThan(0);
    // Human seeds stay (retireSeeds is off); generated = in pool + retired + pruned.
    expect(r.finalPool.length - r.generatedInPool).toBe(40);
    expect(r.generated).toBe(r.generatedInPool + r.retired.mastered + r.retired.burnIn + r.pruned);
  });

  it('the three policies differ', () => {
    const r = runExperiment({ ...small, seed: 2 });
    const [rods, stat, random] = [r.rods!, r.static!, r['random-seed']!];
    expect(new Set([rods.skillEnd, stat.skillEnd, random.skillEnd]).size).toBe(3);
    expect(rods.finalPool).not.toEqual(random.finalPool);
    expect(rods.finalPool).not.toEqual(stat.finalPool);
    expect(rods.zeroVarianceShare).not.toBe(stat.zeroVarianceShare);
  });
});

describe('rods experiment (CLI)', () => {
  async function cli(args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
    try {
      const { stdout, stderr } = await promisify(execFile)(process.execPath, ['bin/rods.mjs', ...args], {
        cwd: ROOT,
      });
      return { code: 0, stdout, stderr };
    } catch (e) {
      const err = e as { code?: number; stdout?: string; stderr?: string };
      return { code: err.code ?? -1, stdout: err.stdout ?? '', stderr: err.stderr ?? '' };
    }
  }

  it('exits 2 for an unknown policy', async () => {
    const r = await cli(['experiment', '--policies', 'bogus']);
    expect(r.code).toBe(2);
    expect(r.stderr).toContain('unknown policy "bogus"');
  });

  it('prints a JSON object keyed by policy', async () => {
    const r = await cli([
      'experiment',
      '--policies',
      'static,rods',
      '--steps',
      '2',
      '--seeds-per-category',
      '2',
      '--json',
    ]);
    expect(r.code).toBe(0);
    const out = JSON.parse(r.stdout) as Record<string, { rollouts: number }>;
    expect(Object.keys(out)).toEqual(['static', 'rods']);
    expect(out.static!.rollouts).toBe(2 * 8 * 16);
  });
});
