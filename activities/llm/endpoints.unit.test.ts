// The worker's named generator endpoints: file and environment, validation, resolution at call time.
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { parseCampaignConfig } from '../../domain/campaign-config.js';
import { describeEndpoint } from './client.js';
import {
  BUILTIN_DEFAULT_BASE_URL,
  EndpointConfigError,
  GeneratorEndpoints,
  loadGeneratorEndpoints,
  resolveGeneratorConfig,
  UnknownEndpointError,
} from './endpoints.js';

const dir = mkdtempSync(path.join(tmpdir(), 'rods-endpoints-'));
const file = (name: string, body: unknown) => {
  const f = path.join(dir, name);
  writeFileSync(f, typeof body === 'string' ? body : JSON.stringify(body));
  return f;
};

describe('loadGeneratorEndpoints', () => {
  it('without a file or variables: "default" is a local vLLM without a key', () => {
    const e = loadGeneratorEndpoints({});
    expect(e.names()).toEqual(['default']);
    expect(e.resolve('default')).toEqual({ name: 'default', baseUrl: BUILTIN_DEFAULT_BASE_URL, headers: {} });
  });

  it('RODS_GENERATOR_BASE_URL, _API_KEY and _HEADERS define "default"', () => {
    const e = loadGeneratorEndpoints({
      RODS_GENERATOR_BASE_URL: 'http://10.0.0.1:8000/v1',
      RODS_GENERATOR_API_KEY: 'sk-x',
      RODS_GENERATOR_HEADERS: '{"x-tenant":"a"}',
    });
    expect(e.resolve('default')).toEqual({
      name: 'default',
      baseUrl: 'http://10.0.0.1:8000/v1',
      apiKey: 'sk-x',
      headers: { 'x-tenant': 'a' },
    });
  });

  it('reads named endpoints from the file, keys inline or by environment variable', () => {
    const f = file('ok.json', {
      a: { baseUrl: 'http://a:8000/v1', apiKey: 'sk-a' },
      b: { baseUrl: 'https://b/v1', apiKeyEnv: 'B_KEY', headers: { 'x-h': '1' } },
    });
    const e = loadGeneratorEndpoints({ RODS_GENERATOR_ENDPOINTS_FILE: f, B_KEY: 'sk-b' });
    expect(e.names()).toEqual(['a', 'b']);
    expect(e.resolve('b')).toEqual({
      name: 'b',
      baseUrl: 'https://b/v1',
      apiKey: 'sk-b',
      headers: { 'x-h': '1' },
    });
    // With a file, there is no implicit default.
    expect(e.has('default')).toBe(false);
    // Serialized (logs, status), names and URLs only.
    expect(JSON.stringify(e)).not.toContain('sk-');
    expect(JSON.stringify(e)).not.toContain('x-h');
  });

  it.each([
    ['bad.json', '{not json', /bad\.json: cannot read it as JSON/],
    ['url.json', { a: { baseUrl: 'ftp://a/v1' } }, /url\.json\.a\.baseUrl: must be an http\(s\) URL/],
    ['extra.json', { a: { baseUrl: 'http://a/v1', key: 'k' } }, /extra\.json\.a: .*key/],
    [
      'both.json',
      { a: { baseUrl: 'http://a/v1', apiKey: 'k', apiKeyEnv: 'K' } },
      /both\.json\.a\.apiKeyEnv: give apiKey or apiKeyEnv, not both/,
    ],
    ['name.json', { 'a b': { baseUrl: 'http://a/v1' } }, /name\.json\.a b: endpoint names/],
    [
      'noenv.json',
      { a: { baseUrl: 'http://a/v1', apiKeyEnv: 'RODS_UNSET_KEY_X' } },
      /noenv\.json\.a\.apiKeyEnv: the environment variable RODS_UNSET_KEY_X is not set/,
    ],
  ])('refuses %s naming the file and field', (name, body, message) => {
    const f = file(name, body);
    expect(() => loadGeneratorEndpoints({ RODS_GENERATOR_ENDPOINTS_FILE: f })).toThrow(EndpointConfigError);
    expect(() => loadGeneratorEndpoints({ RODS_GENERATOR_ENDPOINTS_FILE: f })).toThrow(message);
  });

  it('refuses "default" defined by both the file and the environment, and bad variables', () => {
    const f = file('dflt.json', { default: { baseUrl: 'http://a/v1' } });
    expect(() =>
      loadGeneratorEndpoints({ RODS_GENERATOR_ENDPOINTS_FILE: f, RODS_GENERATOR_BASE_URL: 'http://b/v1' }),
    ).toThrow(/"default" is defined twice/);
    expect(() => loadGeneratorEndpoints({ RODS_GENERATOR_BASE_URL: 'nope' })).toThrow(
      /RODS_GENERATOR_BASE_URL/,
    );
    expect(() => loadGeneratorEndpoints({ RODS_GENERATOR_HEADERS: '[1' })).toThrow(
      /RODS_GENERATOR_HEADERS: not JSON/,
    );
  });
});

describe('resolveGeneratorConfig', () => {
  const endpoints = GeneratorEndpoints.of({
    default: { baseUrl: 'http://op:8000/v1', apiKey: 'sk-op', headers: { 'x-op': '1' } },
  });

  it("takes URL, key and headers from the named endpoint and the campaign's knobs", () => {
    const g = parseCampaignConfig({ generator: { model: 'm', maxTokens: 77 } }).generator;
    const cfg = resolveGeneratorConfig(g, endpoints);
    expect(cfg).toMatchObject({
      endpoint: 'default',
      baseUrl: 'http://op:8000/v1',
      apiKey: 'sk-op',
      headers: { 'x-op': '1' },
      model: 'm',
      maxTokens: 77,
    });
  });

  it('never uses a URL, key or header of a recorded config (even unparsed)', () => {
    const cfg = resolveGeneratorConfig(
      { baseUrl: 'http://evil/v1', apiKey: 'sk-evil', headers: { 'x-evil': '1' }, model: 'm' },
      endpoints,
    );
    expect(cfg).toMatchObject({ baseUrl: 'http://op:8000/v1', apiKey: 'sk-op', headers: { 'x-op': '1' } });
  });

  it('an unknown endpoint is an UnknownEndpointError naming it and the known ones', () => {
    expect(() => resolveGeneratorConfig({ endpoint: 'gone', model: 'm' }, endpoints)).toThrow(
      UnknownEndpointError,
    );
    expect(() => resolveGeneratorConfig({ endpoint: 'gone', model: 'm' }, endpoints)).toThrow(
      /endpoint "gone", which this worker does not have \(its endpoints: default\)/,
    );
  });

  it('messages name the endpoint and its origin, never credentials in the URL', () => {
    expect(describeEndpoint({ endpoint: 'a', baseUrl: 'https://user:sk-pass@h:9/v1?k=sk-q' })).toBe(
      'endpoint "a" (https://h:9)',
    );
  });
});
