import { describe, expect, it } from 'vitest';
import {
  type CampaignConfig,
  CampaignConfigError,
  cadenceSpec,
  campaignConfigBytes,
  campaignConfigSizeError,
  campaignConfigToJson,
  changedPaths,
  injectionPeriod,
  isInjectionBoundary,
  MAX_CAMPAIGN_CONFIG_BYTES,
  MAX_ROLLOUTS_LIMIT,
  parseCadence,
  parseCampaignConfig,
  validateReconfiguration,
  withNewCampaignSettings,
} from './campaign-config.js';

function issues(input: unknown): string {
  try {
    parseCampaignConfig(input);
  } catch (e) {
    expect(e).toBeInstanceOf(CampaignConfigError);
    expect((e as Error).message).toMatch(/^invalid campaign config: /);
    return (e as Error).message;
  }
  throw new Error(`expected ${JSON.stringify(input)} to be refused`);
}

describe('campaign config defaults', () => {
  it("holds every knob of the method with the paper's values", () => {
    const c = parseCampaignConfig({});
    expect(c).toEqual({
      rolloutsPerTask: 16,
      detector: { low: 0.2, high: 0.85, window: { kind: 'latest' }, ewmaAlpha: 0.3 },
      rewards: { maxRollouts: 1024, staleStepTolerance: 2, lateGroups: 'reject-stale' },
      ingestion: {
        maxStepsAhead: 16,
        unknownTasks: 'accept',
        missingSteps: { policy: 'move-on', afterSteps: 3 },
      },
      ablation: {
        rewrite: true,
        judge: true,
        selection: 'boundary',
        randomSeed: 0,
        retirement: true,
        injection: true,
        pool: 'dynamic',
      },
      pool: {
        generatedCap: 400,
        injectionShare: 0.2,
        injectionCadence: { kind: 'epoch' },
        epochSteps: 10,
        retireMasteredAbove: 0.95,
        burnInFloor: 0.2,
        retireSeeds: false,
        usefulWithinSteps: 10,
      },
      selection: {
        budgetPerStep: 8,
        perCategoryQuota: { base: 2, miss_func: 2, miss_param: 2, long_context: 2 },
        cooldownSteps: 5,
        maxConcurrentSyntheses: 4,
        varianceGuard: 'skip',
        minGroupVariance: 0.001,
        minGroups: 2,
        maxStaleSteps: 20,
        rejectionBackoff: { streak: 3, steps: 10 },
      },
      synthesis: {
        maxConfigRepairs: 3,
        nearDuplicateThreshold: 0.9,
        contamination: { enabled: true, ngram: 5, textOverlap: 0.5, sameCallsAndState: true },
        executionTimeoutSeconds: 7200,
        maxRefinements: 1,
        turns: { min: 2, max: 5 },
        callsPerTurn: { min: 1, max: 3 },
        structureTolerance: { turns: 2, meanCallsPerTurn: 1.5 },
        maxStringLength: 200,
        maxListItems: 5,
        augment: {},
      },
      generator: {
        endpoint: 'default',
        model: 'Qwen/Qwen3-32B',
        judgeModel: 'Qwen/Qwen3-32B',
        temperature: 1,
        topP: 0.7,
      },
    });
    expect(parseCampaignConfig(undefined)).toEqual(c);
    expect(parseCampaignConfig(null)).toEqual(c);
  });

  it('keeps partial sections with defaults for the rest, and extra top-level and generator keys', () => {
    const c = parseCampaignConfig({
      name: 'kept',
      pool: { generatedCap: 10 },
      selection: { perCategoryQuota: { base: 3 } },
      generator: { model: 'm', maxTokens: 2048 },
    });
    expect(c.pool).toMatchObject({ generatedCap: 10, injectionShare: 0.2, retireSeeds: false });
    expect(c.selection.perCategoryQuota).toEqual({ base: 3 });
    expect(c.generator).toMatchObject({
      model: 'm',
      maxTokens: 2048,
      topP: 0.7,
      judgeModel: 'Qwen/Qwen3-32B',
    });
    expect((c as Record<string, unknown>).name).toBe('kept');
  });

  it('round-trips through its JSON spelling (what events carry)', () => {
    const c = parseCampaignConfig({
      detector: { window: 'last:4' },
      pool: { injectionCadence: 'steps:7' },
      generator: { extra: { a: 1 } },
    });
    const j = campaignConfigToJson(c);
    expect((j.detector as { window: string }).window).toBe('last:4');
    expect((j.pool as { injectionCadence: string }).injectionCadence).toBe('steps:7');
    expect(parseCampaignConfig(JSON.parse(JSON.stringify(j)))).toEqual(c);
    expect(parseCampaignConfig(campaignConfigToJson(parseCampaignConfig({})))).toEqual(
      parseCampaignConfig({}),
    );
  });
});

describe('campaign config validation says what to change', () => {
  it.each([
    [{ pool: { generatedCap: -1 } }, 'pool.generatedCap: pool.generatedCap (P_max) must be >= 0'],
    [{ pool: { generatedCap: 1.5 } }, 'pool.generatedCap (P_max) must be a whole number of tasks'],
    [{ pool: { injectionShare: 0 } }, 'pool.injectionShare (β) must be > 0'],
    [{ pool: { injectionShare: 1.5 } }, 'pool.injectionShare (β) must be <= 1'],
    [{ pool: { injectionCadence: 'steps:0' } }, 'N must be an integer >= 1'],
    [{ pool: { injectionCadence: 'weekly' } }, "expected 'epoch' (every pool.epochSteps steps) or 'steps:N'"],
    [{ pool: { epochSteps: 0 } }, 'pool.epochSteps must be >= 1'],
    [{ pool: { retireMasteredAbove: 1.2 } }, 'pool.retireMasteredAbove must be in [0, 1]'],
    [{ pool: { burnInFloor: -0.1 } }, 'pool.burnInFloor must be in [0, 1]'],
    [{ pool: { generatedcap: 10 } }, 'pool: Unrecognized key: "generatedcap"'],
    [
      { selection: { budgetPerStep: 4 } },
      'selection.perCategoryQuota: per-category quotas (sum 8) exceed the per-step budget M = 4; lower a quota or raise budgetPerStep',
    ],
    [{ selection: { perCategoryQuota: { base: -1 } } }, 'a quota must be >= 0'],
    [{ selection: { perCategoryQuota: { '': 1 } } }, 'a category name must not be empty'],
    [{ selection: { cooldownSteps: -1 } }, 'selection.cooldownSteps (c) must be >= 0'],
    [{ selection: { maxConcurrentSyntheses: 0 } }, 'set budgetPerStep to 0 to stop selecting'],
    [
      { synthesis: { turns: { min: 4, max: 3 } } },
      'synthesis.turns.min must not exceed synthesis.turns.max; lower min or raise max',
    ],
    [{ synthesis: { turns: { min: 0 } } }, 'synthesis.turns.min must be >= 1'],
    [
      { synthesis: { callsPerTurn: { min: 4 } } },
      'synthesis.callsPerTurn.min must not exceed synthesis.callsPerTurn.max',
    ],
    [{ synthesis: { maxStringLength: 0 } }, 'synthesis.maxStringLength must be >= 1'],
    [{ synthesis: { maxListItems: -1 } }, 'synthesis.maxListItems must be >= 0'],
    [{ synthesis: { maxConfigRepairs: -1 } }, 'synthesis.maxConfigRepairs must be >= 0'],
    [
      { synthesis: { contamination: { textOverlap: 0 } } },
      'synthesis.contamination.textOverlap must be in (0, 1]',
    ],
    [{ synthesis: { contamination: { ngram: 1 } } }, 'synthesis.contamination.ngram must be >= 2'],
    [{ generator: { topP: 0 } }, 'generator.topP must be in (0, 1]'],
    [{ generator: { temperature: 3 } }, 'generator.temperature must be <= 2'],
    [{ generator: { model: '' } }, 'generator.model must not be empty'],
    [{ detector: { low: 0.9, high: 0.1 } }, 'low must not exceed high'],
    [{ ingestion: { maxStepsAhead: 0 } }, 'ingestion.maxStepsAhead must be >= 1'],
    [{ ingestion: { maxStepsAhead: 2.5 } }, 'ingestion.maxStepsAhead must be a whole number of steps'],
    [{ ingestion: { maxStepsahead: 4 } }, 'ingestion: Unrecognized key: "maxStepsahead"'],
    [{ ingestion: { missingSteps: { afterSteps: 0 } } }, 'ingestion.missingSteps.afterSteps must be >= 1'],
    [{ ingestion: { missingSteps: { policy: 'skip' } } }, 'ingestion.missingSteps.policy'],
    [{ rewards: { maxRollouts: 1_000_001 } }, 'rewards.maxRollouts'],
    [
      { rolloutsPerTask: 64, rewards: { maxRollouts: 32 } },
      'rewards.maxRollouts (32) is below rolloutsPerTask (64): every group would be rejected; raise maxRollouts or lower rolloutsPerTask',
    ],
    [
      { pool: { retireMasteredAbove: 0.8 } },
      'pool.retireMasteredAbove (0.8) is below detector.high (0.85): boundary tasks would retire as mastered; raise retireMasteredAbove or lower detector.high',
    ],
    [
      { detector: { low: 0.1 } },
      'pool.burnInFloor (0.2) is above detector.low (0.1): boundary generated tasks would retire in burn-in; lower burnInFloor or raise detector.low',
    ],
  ])('%j', (input, message) => {
    expect(issues(input)).toContain(message);
  });

  it('accepts the edges of every range', () => {
    expect(() =>
      parseCampaignConfig({
        pool: { generatedCap: 0, injectionShare: 1, injectionCadence: 'steps:1', epochSteps: 1 },
        selection: { budgetPerStep: 0, perCategoryQuota: {}, cooldownSteps: 0, maxConcurrentSyntheses: 1 },
        synthesis: { turns: { min: 3, max: 3 }, callsPerTurn: { min: 0, max: 1 }, maxListItems: 0 },
        detector: { low: 0.5, high: 0.5 },
        rewards: { maxRollouts: 16 },
        ingestion: { maxStepsAhead: 1 },
      }),
    ).not.toThrow();
    expect(parseCampaignConfig({ rewards: { maxRollouts: MAX_ROLLOUTS_LIMIT } }).rewards.maxRollouts).toBe(
      MAX_ROLLOUTS_LIMIT,
    );
    // quotas that use the whole budget are fine
    expect(() => parseCampaignConfig({ selection: { budgetPerStep: 8 } })).not.toThrow();
  });

  it('reports every problem at once', () => {
    const m = issues({ pool: { generatedCap: -1, injectionShare: 0 } });
    expect(m).toContain('generatedCap');
    expect(m).toContain('injectionShare');
  });
});

describe('injection cadence', () => {
  it('parses and spells cadences', () => {
    expect(parseCadence('epoch')).toEqual({ kind: 'epoch' });
    expect(parseCadence('steps:25')).toEqual({ kind: 'steps', every: 25 });
    expect(cadenceSpec({ kind: 'steps', every: 25 })).toBe('steps:25');
    expect(() => parseCadence('steps:-1')).toThrow(/expected 'epoch'/);
  });

  it('puts boundaries at positive multiples of the period', () => {
    const epoch = parseCampaignConfig({});
    expect(injectionPeriod(epoch)).toBe(10);
    expect([0, 1, 9, 10, 11, 20, 25].map((s) => isInjectionBoundary(s, epoch))).toEqual([
      false,
      false,
      false,
      true,
      false,
      true,
      false,
    ]);
    const every1 = parseCampaignConfig({ pool: { injectionCadence: 'steps:1' } });
    expect([0, 1, 2].map((s) => isInjectionBoundary(s, every1))).toEqual([false, true, true]);
    expect(isInjectionBoundary(-10, epoch)).toBe(false);
    expect(isInjectionBoundary(10.5, epoch)).toBe(false);
  });
});

describe('validateReconfiguration', () => {
  const current: CampaignConfig = parseCampaignConfig({
    selection: { perCategoryQuota: { base: 2, miss_func: 2 } },
  });

  it('accepts knobs that apply from the next decision on, listing what changed', () => {
    const next = campaignConfigToJson(current) as Record<string, Record<string, unknown>>;
    next.pool = { ...next.pool, generatedCap: 300, injectionCadence: 'steps:5' };
    next.detector = { ...next.detector, low: 0.25 };
    next.selection = { ...next.selection, perCategoryQuota: { base: 3, long_context: 1 } };
    next.generator = { ...next.generator, model: 'other' };
    const r = validateReconfiguration(current, next);
    expect(r).toMatchObject({ ok: true });
    if (!r.ok) throw new Error(r.message);
    expect(r.config.pool.generatedCap).toBe(300);
    expect(r.changedKeys).toEqual([
      'detector.low',
      'generator.model',
      'pool.generatedCap',
      'pool.injectionCadence',
      'selection.perCategoryQuota.base',
      'selection.perCategoryQuota.long_context',
      'selection.perCategoryQuota.miss_func',
    ]);
  });

  it('reports no change for the same config', () => {
    expect(validateReconfiguration(current, campaignConfigToJson(current))).toMatchObject({
      ok: true,
      config: current,
      changedKeys: [],
    });
  });

  it('keeps the settings a new campaign records when a reconfiguration leaves them out', () => {
    const recorded = parseCampaignConfig(withNewCampaignSettings({}));
    expect(recorded.rewards.lateGroups).toBe('fold');
    expect(recorded.ingestion.unknownTasks).toBe('refuse');
    const r = validateReconfiguration(recorded, { detector: { high: 0.9 } });
    expect(r).toMatchObject({ ok: true, changedKeys: ['detector.high'] });
    if (!r.ok) throw new Error('refused');
    expect(r.raw).toMatchObject({ rewards: { lateGroups: 'fold' }, ingestion: { unknownTasks: 'refuse' } });
    // A campaign recorded before them keeps its old behaviour.
    const legacy = parseCampaignConfig({});
    const l = validateReconfiguration(legacy, { detector: { high: 0.9 } });
    if (!l.ok) throw new Error('refused');
    expect(l.config.rewards.lateGroups).toBe('reject-stale');
    expect(l.config.ingestion.unknownTasks).toBe('accept');
  });

  it('refuses what cannot change on a running campaign, saying why and what to do', () => {
    const k = validateReconfiguration(current, { ...campaignConfigToJson(current), rolloutsPerTask: 8 });
    expect(k.ok).toBe(false);
    if (k.ok) throw new Error('expected a refusal');
    expect(k.message).toBe(
      "reconfiguration refused: rolloutsPerTask cannot change on a running campaign (16 -> 8): the trainer's GRPO group size is fixed for a campaign and every task's statistics are counted in groups of it; keep 16, or start a new campaign (or try it with what-if replay)",
    );
    const w = validateReconfiguration(current, {
      ...campaignConfigToJson(current),
      detector: { window: 'ewma:0.5', ewmaAlpha: 0.4 },
    });
    if (w.ok) throw new Error('expected a refusal');
    expect(w.issues).toHaveLength(2);
    expect(w.issues[0]).toMatch(
      /^detector\.window cannot change on a running campaign \("latest" -> "ewma:0\.5"\)/,
    );
    expect(w.issues[1]).toMatch(/^detector\.ewmaAlpha cannot change/);
  });

  it('refuses an invalid config with its validation messages', () => {
    const r = validateReconfiguration(current, { pool: { injectionShare: 0 } });
    if (r.ok) throw new Error('expected a refusal');
    expect(r.message).toMatch(
      /^invalid campaign config: pool\.injectionShare: pool\.injectionShare \(β\) must be > 0/,
    );
  });

  it('diffs nested values into dotted paths', () => {
    expect(changedPaths({ a: { b: 1, c: [1] } }, { a: { b: 1, c: [2] }, d: 1 })).toEqual(['a.c', 'd']);
    expect(changedPaths(1, 2)).toEqual(['(root)']);
  });
});

describe('campaign config size', () => {
  it('counts the UTF-8 bytes of the canonical JSON and refuses over the limit', () => {
    const config = { b: 'é😀\u4e2d', a: [1, 2] };
    expect(campaignConfigBytes(config)).toBe(Buffer.byteLength('{"a":[1,2],"b":"é😀\u4e2d"}', 'utf8'));
    expect(campaignConfigSizeError({})).toBeUndefined();
    const big = { generator: { model: 'x'.repeat(MAX_CAMPAIGN_CONFIG_BYTES) } };
    expect(campaignConfigSizeError(big)).toMatch(/is \d+ bytes .*limit is 262144 bytes \(256 KiB\)/);
  });
});
