// A Merkle tree over an ordered list of records, so that a short root can stand for the list
// (what a checkpoint was trained on) and one record can be shown to belong to it without the rest.
// The shape is RFC 6962's (Certificate Transparency, §2.1): a leaf hashes its record with a 0x00
// prefix and an inner node its two children with 0x01, so a leaf can never pass for a node; a list
// of n > 1 splits at the largest power of two below n. Records are hashed as their canonical JSON
// (canonical-json.ts), so any tool that sorts keys the same way recomputes the root; hashes are
// SHA-256 in lowercase hex. Pure.
import { canonicalJson, utf8Bytes } from './canonical-json.js';
import { sha256Of as sha256 } from './sha256.js';

const HEX = Array.from({ length: 256 }, (_, i) => i.toString(16).padStart(2, '0'));
const hex = (b: Uint8Array) => {
  let s = '';
  for (const x of b) s += HEX[x];
  return s;
};
const bytes = (h: string) => {
  const out = new Uint8Array(h.length >> 1);
  for (let i = 0; i < out.length; i++) out[i] = Number.parseInt(h.slice(2 * i, 2 * i + 2), 16);
  return out;
};

function hashWithPrefix(prefix: number, ...parts: Uint8Array[]): string {
  const n = parts.reduce((a, p) => a + p.length, 1);
  const buf = new Uint8Array(n);
  buf[0] = prefix;
  let at = 1;
  for (const p of parts) {
    buf.set(p, at);
    at += p.length;
  }
  return hex(sha256(buf));
}

/** The leaf hash of bytes: SHA-256(0x00 || bytes). */
export const leafHashOfBytes = (data: Uint8Array): string => hashWithPrefix(0, data);

/** The leaf hash of a record: the leaf hash of its canonical JSON's UTF-8 bytes. */
export const leafHash = (record: unknown): string => leafHashOfBytes(utf8Bytes(canonicalJson(record)));

/** An inner node's hash: SHA-256(0x01 || left || right). */
function nodeBytes(left: Uint8Array, right: Uint8Array): Uint8Array {
  const buf = new Uint8Array(1 + left.length + right.length);
  buf[0] = 1;
  buf.set(left, 1);
  buf.set(right, 1 + left.length);
  return sha256(buf);
}

const nodeHash = (left: string, right: string): string => hex(nodeBytes(bytes(left), bytes(right)));

/** The largest power of two strictly below n (n >= 2). */
function split(n: number): number {
  let k = 1;
  while (k * 2 < n) k *= 2;
  return k;
}

/** The root of leaves [lo, hi), hashed as bytes (no hex between levels, no copies of the list). */
function rootBytes(leaves: readonly Uint8Array[], lo: number, hi: number): Uint8Array {
  if (hi - lo === 1) return leaves[lo]!;
  const k = split(hi - lo);
  return nodeBytes(rootBytes(leaves, lo, lo + k), rootBytes(leaves, lo + k, hi));
}

function rootOf(leaves: readonly string[]): string {
  return hex(rootBytes(leaves.map(bytes), 0, leaves.length));
}

/** The root over the leaf hashes, in order; the empty list's root is SHA-256 of nothing. */
export function merkleRootOfLeaves(leaves: readonly string[]): string {
  return leaves.length === 0 ? hex(sha256(new Uint8Array(0))) : rootOf(leaves);
}

/** The root over the records, in order. */
export function merkleRoot(records: readonly unknown[]): string {
  return merkleRootOfLeaves(records.map(leafHash));
}

/** The sibling hashes from leaf `index` up to the root (RFC 6962 audit path), nearest first. */
export function inclusionProof(leaves: readonly string[], index: number): string[] {
  if (!Number.isInteger(index) || index < 0 || index >= leaves.length)
    throw new RangeError(`leaf ${index} is outside a list of ${leaves.length}`);
  if (leaves.length === 1) return [];
  const k = split(leaves.length);
  return index < k
    ? [...inclusionProof(leaves.slice(0, k), index), rootOf(leaves.slice(k))]
    : [...inclusionProof(leaves.slice(k), index - k), rootOf(leaves.slice(0, k))];
}

/** Whether `leaf` at `index` of a list of `size` leaves, with `proof`, gives `root`. */
export function verifyInclusion(
  leaf: string,
  index: number,
  size: number,
  proof: readonly string[],
  root: string,
): boolean {
  // The path from the root down, rebuilt from the same splits, then folded back up.
  const sides: ('left' | 'right')[] = [];
  let [i, n] = [index, size];
  if (!Number.isInteger(i) || i < 0 || i >= n) return false;
  while (n > 1) {
    const k = split(n);
    if (i < k) {
      sides.push('left');
      n = k;
    } else {
      sides.push('right');
      i -= k;
      n -= k;
    }
  }
  if (sides.length !== proof.length) return false;
  let h = leaf;
  for (let d = sides.length - 1, p = 0; d >= 0; d--, p++)
    h = sides[d] === 'left' ? nodeHash(h, proof[p]!) : nodeHash(proof[p]!, h);
  return h === root;
}
