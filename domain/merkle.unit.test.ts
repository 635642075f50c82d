import { describe, expect, it } from 'vitest';
import {
  inclusionProof,
  leafHash,
  leafHashOfBytes,
  merkleRoot,
  merkleRootOfLeaves,
  verifyInclusion,
} from './merkle.js';

const bytes = (h: string) => Uint8Array.from(h.match(/../g) ?? [], (x) => Number.parseInt(x, 16));

// RFC 6962's reference data (the Certificate Transparency test leaves and the tree heads of the
// first n of them), as every CT implementation tests against.
const LEAVES = [
  '',
  '00',
  '10',
  '2021',
  '3031',
  '40414243',
  '5051525354555657',
  '606162636465666768696a6b6c6d6e6f',
]
  .map(bytes)
  .map(leafHashOfBytes);
const ROOTS = [
  'e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855',
  '6e340b9cffb37a989ca544e6bb780a2c78901d3fb33738768511a30617afa01d',
  'fac54203e7cc696cf0dfcb42c92a1d9dbaf70ad9e621f4bd8d98662f00e3c125',
  'aeb6bcfe274b70a14fb067a5e5578264db0fa9b51af5e0ba159158f329e06e77',
  'd37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7',
  '4e3bbb1f7b478dcfe71fb631631519a3bca12c9aefca1612bfce4c13a86264d4',
  '76e67dadbcdf1e10e1b74ddc608abd2f98dfb16fbce75277b5232a127f2087ef',
  'ddb89be403809e325750d3d263cd78929c2942b7942a34b77e122c9594a74c8c',
  '5dc9da79a70659a9ad559cb701ded9a2ab9d823aad2f4960cfe370eff4604328',
];

describe('Merkle tree (RFC 6962)', () => {
  it('gives the reference tree head for each size 0..8', () => {
    for (let n = 0; n <= 8; n++) expect(merkleRootOfLeaves(LEAVES.slice(0, n)), `size ${n}`).toBe(ROOTS[n]);
  });

  it('gives the reference inclusion proofs', () => {
    expect(inclusionProof(LEAVES, 0)).toEqual([
      '96a296d224f285c67bee93c30f8a309157f0daa35dc5b87e410b78630a09cfc7',
      '5f083f0a1a33ca076a95279832580db3e0ef4584bdff1f54c8a360f50de3031e',
      '6b47aaf29ee3c2af9af889bc1fb9254dabd31177f16232dd6aab035ca39bf6e4',
    ]);
    expect(inclusionProof(LEAVES, 5)).toEqual([
      'bc1a0643b12e4d2d7c77918f44e0f4f79a838b6cf9ec5b5c283e1f4d88599e6b',
      'ca854ea128ed050b41b35ffc1b87b8eb2bde461e9e3b5596ece6b9d5975a0ae0',
      'd37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7',
    ]);
    expect(() => inclusionProof(LEAVES, 8)).toThrow(/outside a list of 8/);
  });

  it("verifies every leaf's proof in every size to 37, and refuses a changed leaf, index or proof", () => {
    const many = Array.from({ length: 37 }, (_, i) => leafHash({ i }));
    for (let n = 1; n <= many.length; n++) {
      const leaves = many.slice(0, n);
      const root = merkleRootOfLeaves(leaves);
      for (let i = 0; i < n; i++) {
        const proof = inclusionProof(leaves, i);
        expect(verifyInclusion(leaves[i]!, i, n, proof, root)).toBe(true);
        expect(verifyInclusion(leafHash({ i: -1 }), i, n, proof, root)).toBe(false);
        if (n > 1) {
          expect(verifyInclusion(leaves[i]!, (i + 1) % n, n, proof, root)).toBe(false);
          expect(verifyInclusion(leaves[i]!, i, n, proof.slice(1), root)).toBe(false);
        }
      }
    }
  });

  it('hashes records as their canonical JSON: key order does not matter, any value does', () => {
    const a = [
      { taskId: 't1', contentHash: 'h1' },
      { taskId: 't2', contentHash: 'h2' },
    ];
    expect(merkleRoot(a)).toBe(merkleRoot([{ contentHash: 'h1', taskId: 't1' }, a[1]]));
    expect(merkleRoot(a)).not.toBe(merkleRoot([a[0], { ...a[1], contentHash: 'h3' }]));
    expect(merkleRoot(a)).not.toBe(merkleRoot([a[1], a[0]]));
  });
});
