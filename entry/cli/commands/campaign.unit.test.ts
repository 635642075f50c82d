// `rods campaign start` refuses an oversized config with exit code 2 before touching any service.
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { MAX_CAMPAIGN_CONFIG_BYTES } from '../../../domain/campaign-config.js';
import { main } from '../main.js';

afterEach(() => {
  vi.restoreAllMocks();
  process.exitCode = undefined;
});

describe('rods campaign start', () => {
  it('refuses a config over the size limit with exit code 2, naming limit and size', async () => {
    const file = join(mkdtempSync(join(tmpdir(), 'rods-cli-')), 'big.json');
    writeFileSync(file, JSON.stringify({ generator: { model: 'x'.repeat(MAX_CAMPAIGN_CONFIG_BYTES) } }));
    const err: string[] = [];
    vi.spyOn(console, 'error').mockImplementation((...parts: unknown[]) => {
      err.push(parts.join(' '));
    });
    await main(['node', 'rods', 'campaign', 'start', '--config', file, '--id', 'too-big']);
    expect(process.exitCode).toBe(2);
    expect(err.join('\n')).toMatch(
      new RegExp(`config is \\d+ bytes .*limit is ${MAX_CAMPAIGN_CONFIG_BYTES} bytes \\(256 KiB\\)`),
    );
  });

  it.each([
    ['a key', { apiKey: 'sk-cli-canary' }, 'generator.apiKey'],
    ['a header', { headers: { authorization: 'Bearer sk-cli-canary' } }, 'generator.headers'],
    ['a URL', { baseUrl: 'http://127.0.0.1:7400/v1' }, 'generator.baseUrl'],
  ])(
    'refuses a config carrying %s with exit code 2, naming the field, and never prints it',
    async (_what, extra, field) => {
      const file = join(mkdtempSync(join(tmpdir(), 'rods-cli-')), 'secret.json');
      writeFileSync(file, JSON.stringify({ generator: { model: 'm', ...extra } }));
      const err: string[] = [];
      vi.spyOn(console, 'error').mockImplementation((...parts: unknown[]) => {
        err.push(parts.join(' '));
      });
      await main(['node', 'rods', 'campaign', 'start', '--config', file, '--id', 'secret-cli']);
      expect(process.exitCode).toBe(2);
      expect(err.join('\n')).toContain(`${field}: ${field} is not a campaign setting`);
      expect(err.join('\n')).not.toContain('sk-cli-canary');
    },
  );

  it('refuses an endpoint that is not in RODS_GENERATOR_ENDPOINTS_FILE', async () => {
    const d = mkdtempSync(join(tmpdir(), 'rods-cli-'));
    const endpoints = join(d, 'endpoints.json');
    writeFileSync(endpoints, JSON.stringify({ default: { baseUrl: 'http://127.0.0.1:8000/v1' } }));
    const file = join(d, 'config.json');
    writeFileSync(file, JSON.stringify({ generator: { endpoint: 'other' } }));
    vi.stubEnv('RODS_GENERATOR_ENDPOINTS_FILE', endpoints);
    const err: string[] = [];
    vi.spyOn(console, 'error').mockImplementation((...parts: unknown[]) => {
      err.push(parts.join(' '));
    });
    try {
      await main(['node', 'rods', 'campaign', 'start', '--config', file, '--id', 'unknown-endpoint']);
    } finally {
      vi.unstubAllEnvs();
    }
    expect(process.exitCode).toBe(2);
    expect(err.join('\n')).toContain(`"other" is not among the operator's generator endpoints (default)`);
  });
});
