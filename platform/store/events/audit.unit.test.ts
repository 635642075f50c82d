import { describe, expect, it } from 'vitest';
import { type AnchorHead, anchorDigest } from './audit.js';

const S = '0f9e8d7c-6b5a-4c3d-8e1f-2a3b4c5d6e7f';
const heads: AnchorHead[] = [
  ['campaign-a', 7, 'aa'.repeat(32)],
  ['campaign-b', 3, 'bb'.repeat(32)],
];

describe('anchorDigest', () => {
  it('covers the store, every head, the position and the scope; keyed with a key', () => {
    const base = anchorDigest({ storeId: S, globalPosition: 10, streamPrefix: null, heads });
    expect(base.algorithm).toBe('sha256');
    const variants = [
      anchorDigest({ storeId: S, globalPosition: 11, streamPrefix: null, heads }),
      anchorDigest({ storeId: S, globalPosition: 10, streamPrefix: 'campaign-', heads }),
      anchorDigest({ storeId: S, globalPosition: 10, streamPrefix: null, heads: heads.slice(1) }),
      anchorDigest({
        storeId: S,
        globalPosition: 10,
        streamPrefix: null,
        heads: [heads[0]!, ['campaign-b', 2, 'bb'.repeat(32)]],
      }),
      anchorDigest({
        storeId: S,
        globalPosition: 10,
        streamPrefix: null,
        heads: [heads[0]!, ['campaign-b', 3, 'cc'.repeat(32)]],
      }),
    ];
    variants.push(
      anchorDigest({
        storeId: '1f9e8d7c-6b5a-4c3d-8e1f-2a3b4c5d6e7f',
        globalPosition: 10,
        streamPrefix: null,
        heads,
      }),
    );
    for (const v of variants) expect(v.digest.equals(base.digest)).toBe(false);
    const k1 = anchorDigest({ storeId: S, globalPosition: 10, streamPrefix: null, heads }, 'k1');
    const k2 = anchorDigest({ storeId: S, globalPosition: 10, streamPrefix: null, heads }, 'k2');
    expect(k1.algorithm).toBe('hmac-sha256');
    expect(k1.digest.equals(k2.digest)).toBe(false);
    expect(k1.digest.equals(base.digest)).toBe(false);
    expect(
      anchorDigest({ storeId: S, globalPosition: 10, streamPrefix: null, heads }, 'k1').digest.equals(
        k1.digest,
      ),
    ).toBe(true);
  });
});
