import { chmodSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import {
  bearerToken,
  describeMissing,
  loadTokens,
  missingScopes,
  parseScope,
  parseTokensFile,
  type Scope,
  TokenSet,
} from './auth.js';
import { parseIfNoneMatch, sample } from './pool.js';
import { fieldPath } from './problem.js';

describe('gateway helpers', () => {
  it('reads RODS_GATEWAY_TOKENS as admin tokens, with a warning naming no token', () => {
    const loaded = loadTokens({ env: { RODS_GATEWAY_TOKENS: ' x, y ,,' } });
    expect(loaded.entries.map((e) => [e.token, e.scopes, e.label])).toEqual([
      ['x', ['admin'], 'RODS_GATEWAY_TOKENS[0]'],
      ['y', ['admin'], 'RODS_GATEWAY_TOKENS[1]'],
    ]);
    expect(loaded.warnings).toEqual([expect.stringMatching(/admin token.*RODS_GATEWAY_TOKENS_FILE/)]);
    expect(loadTokens({ env: {} })).toEqual({ entries: [], warnings: [] });
    const set = new TokenSet(['alpha', 'beta']);
    expect(set.check('alpha')).toBe(true);
    expect(set.check('beta')).toBe(true);
    expect(set.check('alph')).toBe(false);
    expect(set.check('')).toBe(false);
    expect(set.identify('beta')).toEqual({ label: 'token 2', scopes: ['admin'] });
  });

  it('reads a tokens file: scopes per token, comments, an old bare token as admin with a warning', () => {
    const dir = mkdtempSync(path.join(tmpdir(), 'rods-tokens-'));
    const file = path.join(dir, 'tokens');
    writeFileSync(
      file,
      '# trainers\nalpha campaign:c-1 campaign:c-2  # two campaigns\r\n\n  beta  \ngamma read,admin\n',
      { mode: 0o600 },
    );
    const loaded = loadTokens({ file, env: { RODS_GATEWAY_TOKENS: 'ignored' } });
    expect(loaded.entries).toEqual([
      { token: 'alpha', scopes: ['campaign:c-1', 'campaign:c-2'], label: 'tokens file line 2' },
      { token: 'beta', scopes: ['admin'], label: 'tokens file line 4' },
      { token: 'gamma', scopes: ['read', 'admin'], label: 'tokens file line 5' },
    ]);
    expect(loaded.warnings).toEqual([
      expect.stringMatching(/^tokens file line 4: a token without scopes is an admin token/),
      'RODS_GATEWAY_TOKENS is ignored: the tokens file is used',
    ]);
    // RODS_GATEWAY_TOKENS_FILE names it too; a file others can read is warned about.
    chmodSync(file, 0o644);
    const viaEnv = loadTokens({ env: { RODS_GATEWAY_TOKENS_FILE: file } });
    expect(viaEnv.entries).toHaveLength(3);
    expect(viaEnv.warnings).toContain('the tokens file is readable by other users: chmod 600 it');
  });

  it('refuses a tokens file with bad lines, naming the line and never the token', () => {
    const refused = (text: string) => {
      try {
        parseTokensFile(text);
      } catch (e) {
        return (e as Error).message;
      }
      throw new Error('not refused');
    };
    expect(refused('s3cret-1 writer\n')).toBe(
      'tokens file line 1: unknown scope "writer" (admin, read or campaign:<id>)',
    );
    expect(refused('s3cret-1 campaign:\ns3cret-2 campaign:bad/id\n')).toMatch(
      /line 1: scope "campaign:" does not name a valid campaign id; tokens file line 2: scope "campaign:bad\/id"/,
    );
    expect(refused('s3cret-1 admin\ns3cret-1 read\n')).toBe('tokens file line 2: the token of line 1 again');
    expect(refused('s3cr\u00e9t admin\n')).toBe(
      'tokens file line 1: the token holds characters a bearer token cannot have',
    );
    expect(refused('# nothing\n\n')).toBe('tokens file holds no token');
    for (const text of ['s3cret-1 writer', 's3cret-1 admin\ns3cret-1 read', 's3cret-1 campaign:'])
      expect(refused(text)).not.toContain('s3cret');
  });

  it('grants a route by scope: admin implies all, read reads all, campaign:<id> its campaign', () => {
    const who = (...scopes: Scope[]) => ({ label: 't', scopes });
    const write = { kind: 'campaign-write', campaignId: 'c1' } as const;
    const read = { kind: 'campaign-read', campaignId: 'c1' } as const;
    const admin = { kind: 'admin' } as const;
    expect(missingScopes(who('admin'), write)).toBeNull();
    expect(missingScopes(who('admin'), read)).toBeNull();
    expect(missingScopes(who('admin'), admin)).toBeNull();
    expect(missingScopes(who('campaign:c1'), write)).toBeNull();
    expect(missingScopes(who('campaign:c1'), read)).toBeNull();
    expect(missingScopes(who('campaign:c1'), admin)).toEqual(['admin']);
    expect(missingScopes(who('campaign:c2'), write)).toEqual(['campaign:c1', 'admin']);
    expect(missingScopes(who('campaign:c10'), read)).toEqual(['read', 'campaign:c1', 'admin']);
    expect(missingScopes(who('read'), read)).toBeNull();
    expect(missingScopes(who('read'), write)).toEqual(['campaign:c1', 'admin']);
    expect(missingScopes(who(), { kind: 'authenticated' })).toBeNull();
    expect(describeMissing(['campaign:c1', 'admin'])).toBe('requires scope campaign:c1 or admin');
    expect(describeMissing(['read', 'campaign:c1', 'admin'])).toBe(
      'requires scope read, campaign:c1 or admin',
    );
    expect(describeMissing(['admin'])).toBe('requires scope admin');
    expect(parseScope('campaign:c1')).toBe('campaign:c1');
    expect(parseScope('Admin')).toMatch(/unknown scope/);
  });

  it('parses bearer headers, If-None-Match and field paths', () => {
    expect(bearerToken('Bearer abc')).toBe('abc');
    expect(bearerToken('bearer  abc ')).toBe('abc');
    expect(bearerToken('Basic abc')).toBeUndefined();
    expect(bearerToken('Bearer')).toBeUndefined();
    expect(parseIfNoneMatch('"3", W/"4"')).toEqual({ any: false, versions: [3, 4] });
    expect(parseIfNoneMatch('*').any).toBe(true);
    expect(fieldPath(['groups', 3, 'rewards', 2])).toBe('groups[3].rewards[2]');
  });

  it('samples deterministically for a seed', () => {
    const items = ['a', 'b', 'c'];
    expect(sample(items, 20, 's')).toEqual(sample(items, 20, 's'));
    expect(sample(items, 20, 's')).not.toEqual(sample(items, 20, 't'));
    expect(sample(items, 20, 's').every((x) => items.includes(x))).toBe(true);
  });
});
