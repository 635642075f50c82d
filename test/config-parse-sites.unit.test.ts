// A campaign config is parsed at one site per process: platform/config/campaign-config.ts (parsed
// once per distinct config, then served frozen from memory) for every product process. Workflow
// code runs in its own sandbox and may not import the platform: each workflow run parses its input
// there, once. The domain defines the parse and uses it in its own rules.
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { isTestFile, ROOT, sourceFiles } from './support/sources.js';

const ALLOWED = new Set([
  'platform/config/campaign-config.ts',
  // the workflow sandbox: its input, once per run
  'workflows/campaign.ts',
  'workflows/synthesis.ts',
]);

/** Calls of the config parsers in a source text (comments left out). */
const parseCalls = (source: string) =>
  source
    .replace(/\/\*[\s\S]*?\*\//g, '')
    .replace(/^\s*\/\/.*$/gm, '')
    .match(/\b(parseCampaignConfig|parseNewCampaignConfig|CampaignConfigSchema\.(?:safe)?[pP]arse)\s*\(/g) ??
  [];

describe('config parse sites', () => {
  it('finds parser calls and not prose or imports', () => {
    expect(
      parseCalls('import { parseCampaignConfig } from "x";\n// parseCampaignConfig(c) in prose\n'),
    ).toEqual([]);
    expect(parseCalls('const c = parseCampaignConfig(raw); CampaignConfigSchema.safeParse(v);')).toHaveLength(
      2,
    );
  });

  it('parses a campaign config in product code only through the process cache (and the workflow sandbox)', () => {
    const found = sourceFiles()
      .filter((f) => f.endsWith('.ts') && !isTestFile(f) && !f.startsWith('test/') && !f.startsWith('dev/'))
      .filter((f) => !f.startsWith('domain/'))
      .filter((f) => parseCalls(readFileSync(path.join(ROOT, f), 'utf8')).length > 0);
    expect(found.filter((f) => !ALLOWED.has(f))).toEqual([]);
    // and the cache itself still parses (the list is not stale)
    expect(found).toContain('platform/config/campaign-config.ts');
  });
});
