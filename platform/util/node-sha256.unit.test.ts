// The node:crypto SHA-256 processes install gives the ids the pure implementation gives.
import { sha256 } from '@noble/hashes/sha2.js';
import { afterEach, describe, expect, it } from 'vitest';
import { utf8Bytes } from '../../domain/canonical-json.js';
import { derivedUuid, eventIds, useSha256 } from '../../domain/ids.js';
import { installNodeSha256 } from './node-sha256.js';

afterEach(() => useSha256((text) => sha256(utf8Bytes(text))));

describe('installNodeSha256', () => {
  it('derives the same ids as the pure SHA-256', () => {
    const parts: (string | number)[][] = [['a'], ['x', 1, ''], ['é\u001f\ud800', 'x'.repeat(300)], ['😀', 0]];
    const pure = parts.map((p) => derivedUuid(...p));
    const group = eventIds.rolloutGroupScored('c', 3, 'b', 'task-1');
    installNodeSha256();
    expect(parts.map((p) => derivedUuid(...p))).toEqual(pure);
    expect(eventIds.rolloutGroupScored('c', 3, 'b', 'task-1')).toBe(group);
  });
});
