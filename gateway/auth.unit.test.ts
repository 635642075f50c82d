import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { bearerToken, loadTokens, TokenSet } from './auth.js';
import { parseIfNoneMatch, sample } from './pool.js';
import { fieldPath } from './problem.js';

describe('gateway helpers', () => {
  it('reads tokens from a file or RODS_GATEWAY_TOKENS and checks them', () => {
    const dir = mkdtempSync(path.join(tmpdir(), 'rods-tokens-'));
    const file = path.join(dir, 'tokens');
    writeFileSync(file, '# trainers\nalpha\n\n  beta  \n');
    expect(loadTokens({ file })).toEqual(['alpha', 'beta']);
    expect(loadTokens({ env: { RODS_GATEWAY_TOKENS: ' x, y ,,' } })).toEqual(['x', 'y']);
    const set = new TokenSet(['alpha', 'beta']);
    expect(set.check('alpha')).toBe(true);
    expect(set.check('beta')).toBe(true);
    expect(set.check('alph')).toBe(false);
    expect(set.check('')).toBe(false);
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
