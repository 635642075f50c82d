// A campaign config names a generator endpoint; URLs, keys and headers are the operator's.
import { describe, expect, it } from 'vitest';
import {
  CampaignConfigError,
  campaignConfigToJson,
  NewCampaignConfigSchema,
  operatorOnlyIssues,
  parseCampaignConfig,
  parseNewCampaignConfig,
  redactCampaignConfig,
  validateReconfiguration,
} from './campaign-config.js';

const KEY = 'sk-canary-unit';

describe('operator-only generator settings', () => {
  it.each([
    ['baseUrl', 'http://evil.example/v1'],
    ['apiKey', KEY],
    ['apiKeyEnv', 'DATABASE_URL'],
    ['headers', { authorization: `Bearer ${KEY}` }],
    ['api_key', KEY],
    ['Authorization', KEY],
  ])('refuses generator.%s in a new config, naming the field', (field, value) => {
    const config = { generator: { model: 'm', [field]: value } };
    expect(operatorOnlyIssues(config).map((i) => i.path.join('.'))).toEqual([`generator.${field}`]);
    expect(() => parseNewCampaignConfig(config)).toThrow(CampaignConfigError);
    expect(() => parseNewCampaignConfig(config)).toThrow(
      `generator.${field}: generator.${field} is not a campaign setting`,
    );
    const r = NewCampaignConfigSchema.safeParse(config);
    expect(r.success).toBe(false);
    expect(r.error?.issues.map((i) => i.path.join('.'))).toEqual([`generator.${field}`]);
  });

  it('accepts an endpoint name and knobs; the endpoint defaults to "default"', () => {
    expect(
      parseNewCampaignConfig({ generator: { endpoint: 'vllm-a', model: 'm', maxTokens: 10 } }).generator,
    ).toMatchObject({
      endpoint: 'vllm-a',
      model: 'm',
      maxTokens: 10,
    });
    expect(parseNewCampaignConfig({}).generator.endpoint).toBe('default');
    expect(
      NewCampaignConfigSchema.safeParse({ generator: { endpoint: 'a b' } }).error?.issues[0]?.path,
    ).toEqual(['generator', 'endpoint']);
  });

  it('still reads a recorded config that carries a URL, key and headers, and drops them', () => {
    const old = {
      generator: { baseUrl: 'http://127.0.0.1:7400/v1', apiKey: KEY, headers: { 'x-a': KEY }, model: 'm' },
    };
    const c = parseCampaignConfig(old);
    expect(c.generator).toMatchObject({ endpoint: 'default', model: 'm' });
    expect(JSON.stringify(campaignConfigToJson(c))).not.toContain(KEY);
    expect(JSON.stringify(campaignConfigToJson(c))).not.toContain('baseUrl');
  });

  it('redacts recorded configs, as objects or JSON text, and leaves the rest alone', () => {
    const old = { name: 'x', generator: { baseUrl: 'http://h/v1', apiKey: KEY, model: 'm' } };
    expect(redactCampaignConfig(old)).toEqual({ name: 'x', generator: { model: 'm' } });
    expect(JSON.parse(redactCampaignConfig(JSON.stringify(old)))).toEqual({
      name: 'x',
      generator: { model: 'm' },
    });
    expect(redactCampaignConfig('not json')).toBe('not json');
    expect(redactCampaignConfig({ a: 1 })).toEqual({ a: 1 });
    expect(redactCampaignConfig(null)).toBe(null);
  });

  it('a reconfiguration of a campaign recorded with a URL still validates (what the workflow handler runs)', () => {
    const current = parseCampaignConfig({ generator: { baseUrl: 'http://h/v1', model: 'm' } });
    const r = validateReconfiguration(current, { generator: { model: 'n' } });
    expect(r).toMatchObject({ ok: true, changedKeys: ['generator.model'] });
  });
});
