import { execFile } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { Command } from 'commander';
import { afterAll, describe, expect, it } from 'vitest';
import { AblationConfigSchema, parseCampaignConfig } from '../../domain/campaign-config.js';
import { UsageError } from '../../entry/cli/errors.js';
import { ROOT } from '../../test/support/sources.js';
import { register } from '../commands/experiment.js';
import {
  BFCL_CLASSES,
  CATEGORIES,
  DEFAULT_POLICIES,
  makeTasks,
  POLICY_SPECS,
  policyConfig,
  policySpec,
  runExperiment,
  runPolicy,
  sweepPoints,
} from './experiment.js';
import { PARAMETERS, REASONS, type SimParameters } from './parameters.js';

/** A small world: 10 seeds and 10 held-out tasks per category, 8 tasks per step. */
const small: SimParameters = { ...PARAMETERS, trainPerCategory: 10, heldOutPerCategory: 10, batchTasks: 8 };
const config = parseCampaignConfig({});

describe('makeTasks', () => {
  it('splits each category into seeds and held-out tasks, BFCL-like', () => {
    const set = makeTasks(1, PARAMETERS);
    expect(set.train).toHaveLength(400);
    expect(set.heldOut).toHaveLength(400);
    const ids = [...set.train, ...set.heldOut].map((t) => t.taskId);
    expect(new Set(ids).size).toBe(800);
    expect(set.train.map((t) => t.taskId)).toContain('base_99');
    expect(set.heldOut.map((t) => t.taskId)).toContain('long_context_100');
    for (const t of [...set.train, ...set.heldOut]) {
      expect(CATEGORIES).toContain(t.category);
      expect(t.classes.length === 1 || (t.classes.length === 2 && t.classes[0] !== t.classes[1])).toBe(true);
      for (const c of t.classes) expect(BFCL_CLASSES).toContain(c);
      const miss = t.category === 'miss_func' || t.category === 'miss_param';
      expect(t.turns).toBeGreaterThanOrEqual(miss ? 2 : 1);
      expect(t.turns).toBeLessThanOrEqual(miss ? 8 : 7);
    }
    expect(makeTasks(1, PARAMETERS)).toEqual(set);
    expect(makeTasks(2, PARAMETERS).train[0]!.difficulty).not.toBe(set.train[0]!.difficulty);
  });
});

describe('policies as campaign config ablations', () => {
  it('maps each policy to a valid ablation of the campaign config', () => {
    const expected: Record<string, object> = {
      static: { injection: false, retirement: false },
      'random-seed': { selection: 'random' },
      rods: {},
      'rods-no-retirement': { retirement: false },
      'rods-static-pool': { pool: 'static' },
    };
    expect(Object.keys(POLICY_SPECS)).toEqual(DEFAULT_POLICIES);
    for (const [name, ablation] of Object.entries(expected)) {
      expect(POLICY_SPECS[name]!.ablation).toEqual(ablation);
      const cfg = policyConfig(config, POLICY_SPECS[name]!.ablation, 7);
      expect(AblationConfigSchema.parse(cfg.ablation)).toEqual(cfg.ablation);
      expect(cfg.ablation).toMatchObject({ ...ablation, randomSeed: 7 });
    }
    expect(POLICY_SPECS.static!.synthesis).toBe(false);
    expect(POLICY_SPECS['rods-static-pool']!.synthesis).toBe(true);
  });

  it("policy `config` runs the config's own ablation", () => {
    const base = { ablation: { retirement: false } };
    const a = runExperiment({
      policies: ['config', 'rods-no-retirement'],
      seeds: 1,
      steps: 25,
      params: small,
      config: base,
    });
    expect(a.policies[0]!.ablation).toEqual({ ...parseCampaignConfig(base).ablation, randomSeed: undefined });
    expect(a.policies[0]!.heldOut.mean).toBe(a.policies[1]!.heldOut.mean);
    expect(a.policies[0]!.retired).toBe(0);
    expect(() => policySpec('bogus', config)).toThrow(/unknown policy/);
  });
});

describe('runPolicy', () => {
  const set = makeTasks(3, small);
  const run = (name: string, steps = 40) =>
    runPolicy(name, POLICY_SPECS[name]!, set, { seed: 3, steps, params: small, config });

  it('every policy uses the same rollouts: B tasks x K each step', () => {
    const runs = DEFAULT_POLICIES.map((p) => run(p));
    for (const r of runs) {
      expect(r.rollouts).toBe(40 * 8 * 16);
      expect(r.groups).toBe(40 * 8);
    }
    const result = runExperiment({ seeds: 2, steps: 20, params: small });
    expect(new Set(result.policies.map((p) => p.rollouts))).toEqual(new Set([20 * 8 * 16]));
  });

  it('never trains on a held-out task, and does train on synthesized ones', () => {
    const heldOut = new Set(set.heldOut.map((t) => t.taskId));
    for (const p of DEFAULT_POLICIES) {
      const r = run(p);
      expect(r.trainedTaskIds.filter((id) => heldOut.has(id))).toEqual([]);
      if (p === 'rods') expect(r.trainedTaskIds.some((id) => id.includes('~s'))).toBe(true);
      else if (p === 'static') expect(r.trainedTaskIds.every((id) => !id.includes('~'))).toBe(true);
    }
  });

  it('follows each ablation: static changes nothing, the static pool synthesizes and injects once, no-retirement retires nothing', () => {
    const stat = run('static');
    expect(stat).toMatchObject({
      selected: expect.any(Number),
      validated: 0,
      injected: 0,
      retired: 0,
      finalPoolSize: 40,
    });
    // The static pool: one wave, selected at the first injection boundary (step 10), nothing retired.
    const staticPool = run('rods-static-pool');
    expect(staticPool.retired).toBe(0);
    expect(staticPool.selected).toBeGreaterThan(0);
    // At full size (400 seeds, 64 a step) the wave's candidates are injected, and trained on.
    const full = runPolicy('rods-static-pool', POLICY_SPECS['rods-static-pool']!, makeTasks(3, PARAMETERS), {
      seed: 3,
      steps: 40,
      params: PARAMETERS,
      config,
    });
    expect(full.injected).toBeGreaterThan(0);
    expect(full.injected).toBeLessThanOrEqual(full.validated);
    expect(full.retired).toBe(0);
    expect(full.trainedTaskIds.some((id) => id.includes('~s'))).toBe(true);
    const rods = run('rods');
    expect(rods.injected).toBeGreaterThan(0);
    expect(rods.finalPoolSize).toBeGreaterThan(40);
    const noRet = run('rods-no-retirement');
    expect(noRet.retired).toBe(0);
    expect(noRet.injected).toBeGreaterThan(0);
    expect(run('random-seed').trainedTaskIds.sort()).not.toEqual(rods.trainedTaskIds.sort());
  });

  it('learns: held-out success rises under every policy, and is deterministic for a seed', () => {
    const r = run('static', 60);
    expect(r.heldOutEnd).toBeGreaterThan(r.heldOutStart);
    expect(r.trainEnd).toBeGreaterThan(r.heldOutEnd);
    expect(r.heldOutCurve.map((c) => c.step)).toEqual([0, 5, 10, 15, 20, 25, 30, 35, 40, 45, 50, 55, 60]);
    expect(r.boundaryShare).toHaveLength(60);
    expect(run('rods', 60)).toEqual(run('rods', 60));
  });
});

describe('runExperiment', () => {
  it('summarises each policy over seeds with intervals and a paired comparison with static', () => {
    const r = runExperiment({ policies: ['static', 'rods'], seeds: 3, steps: 20, params: small });
    expect(r.seeds).toEqual([1, 2, 3]);
    const [stat, rods] = r.policies;
    expect(stat!.vsStatic).toBeNull();
    expect(stat!.heldOut.n).toBe(3);
    expect(stat!.heldOut.half).toBeGreaterThan(0);
    expect(rods!.vsStatic!.mean).toBeCloseTo(rods!.heldOut.mean - stat!.heldOut.mean, 12);
    expect(rods!.boundaryShare).toHaveLength(20);
  });

  it('sweeps three parameters, two values each', () => {
    const pts = sweepPoints();
    expect(pts.map((p) => p.parameter)).toEqual([
      'transfer (x default)',
      'transfer (x default)',
      'difficultyMean',
      'difficultyMean',
      'generatorNoiseSd',
      'generatorNoiseSd',
    ]);
    expect(pts[1]!.params).toEqual({
      classTransfer: 2 * PARAMETERS.classTransfer,
      structureTransfer: 2 * PARAMETERS.structureTransfer,
    });
  });

  it('every parameter has a reason', () => {
    for (const k of Object.keys(PARAMETERS))
      expect(REASONS[k as keyof SimParameters]).toMatch(/^[A-Z0-9].{30,}\.$/);
  });
});

describe('npm run dev -- experiment (CLI)', () => {
  const dirs: string[] = [];
  afterAll(() => {
    for (const d of dirs) rmSync(d, { recursive: true, force: true });
  });
  const tmp = () => {
    const d = mkdtempSync(path.join(tmpdir(), 'rods-experiment-'));
    dirs.push(d);
    return d;
  };

  async function parse(args: string[]): Promise<unknown> {
    const program = new Command().exitOverride();
    register(program);
    return program.parseAsync(['node', 'rods', 'experiment', ...args]).then(
      () => undefined,
      (e: unknown) => e,
    );
  }

  it.each([
    [['--policies', 'bogus'], /unknown policy "bogus"/],
    [['--policies', ','], /at least one/],
    [['--seeds', '0'], /--seeds must be a positive integer/],
    [['--steps', '2.5'], /--steps must be a positive integer/],
    [['--first-seed', '-1'], /--first-seed/],
    [['--policies', 'config'], /needs --config/],
    [['--config', '/nonexistent/c.json'], /--config/],
    [['--ablation', 'judge-of'], /unknown ablation switch "judge-of"/],
  ])('refuses %j', async (args, message) => {
    const e = await parse(args as string[]);
    expect(e).toBeInstanceOf(UsageError);
    expect((e as Error).message).toMatch(message as RegExp);
  });

  it('refuses an invalid config file and a non-empty --out folder', async () => {
    const d = tmp();
    const bad = path.join(d, 'bad.json');
    writeFileSync(bad, JSON.stringify({ ablation: { selection: 'sometimes' } }));
    expect(await parse(['--config', bad])).toBeInstanceOf(UsageError);
    expect(((await parse(['--out', d])) as Error).message).toMatch(/not empty/);
  });

  it("prints JSON with every policy, including the config file's, and writes the report with --out", async () => {
    const d = tmp();
    const cfg = path.join(d, 'campaign.json');
    writeFileSync(cfg, JSON.stringify({ campaignId: 'x', ablation: { judge: false } }));
    const out = path.join(d, 'report');
    const { stdout } = await promisify(execFile)(
      process.execPath,
      [
        'bin/rods-dev.mjs',
        'experiment',
        '--seeds',
        '2',
        '--steps',
        '10',
        '--per-category',
        '5',
        '--batch',
        '4',
        '--config',
        cfg,
        '--out',
        out,
        '--json',
      ],
      { cwd: ROOT },
    );
    const r = JSON.parse(stdout) as { policies: { policy: string; rollouts: number; ablation: object }[] };
    expect(r.policies.map((p) => p.policy)).toEqual([...DEFAULT_POLICIES, 'config']);
    expect(new Set(r.policies.map((p) => p.rollouts))).toEqual(new Set([10 * 4 * 16]));
    expect(r.policies.at(-1)!.ablation).toMatchObject({ judge: false });
    for (const f of ['report.md', 'held-out.svg', 'boundary.svg', 'zero-variance.svg', 'result.json'])
      expect(existsSync(path.join(out, f)), f).toBe(true);
    const svg = readFileSync(path.join(out, 'held-out.svg'), 'utf8');
    expect(svg.startsWith('<svg')).toBe(true);
    expect(svg).not.toMatch(/NaN|undefined/);
    expect(readFileSync(path.join(out, 'report.md'), 'utf8')).toMatch(
      /\| rods-static-pool \| [\d.]+% ± [\d.]+ \|/,
    );
  });
});
