// The node:crypto SHA-256 processes install gives the ids the pure implementation gives.
import { afterEach, describe, expect, it } from 'vitest';
import { sha256Hex } from '../../domain/canonical-json.js';
import { derivedUuid, eventIds, useSha256 } from '../../domain/ids.js';
import { merkleRoot } from '../../domain/merkle.js';
import { pureSha256 } from '../../domain/sha256.js';
import { installNodeSha256 } from './node-sha256.js';

afterEach(() => useSha256(pureSha256));

describe('installNodeSha256', () => {
  it('derives the same ids, Merkle roots and content hashes as the pure SHA-256', () => {
    const parts: (string | number)[][] = [['a'], ['x', 1, ''], ['é\u001f\ud800', 'x'.repeat(300)], ['😀', 0]];
    const pure = parts.map((p) => derivedUuid(...p));
    const group = eventIds.rolloutGroupScored('c', 3, 'b', 'task-1');
    const records = Array.from({ length: 37 }, (_, i) => ({ taskId: `t${i}\ud800😀`, steps: [i] }));
    const root = merkleRoot(records);
    const content = sha256Hex('é\u001f\ud800😀');
    installNodeSha256();
    expect(parts.map((p) => derivedUuid(...p))).toEqual(pure);
    expect(eventIds.rolloutGroupScored('c', 3, 'b', 'task-1')).toBe(group);
    // Merkle roots (manifests) and content hashes hash bytes and text through the same hook.
    expect(merkleRoot(records)).toBe(root);
    expect(sha256Hex('é\u001f\ud800😀')).toBe(content);
  });
});
