// `rods campaign start` refuses an oversized config with exit code 2 before touching any service.
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { MAX_CAMPAIGN_CONFIG_BYTES } from '../../domain/campaign-config.js';
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
});
