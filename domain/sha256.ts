// SHA-256 for the pure core (derived ids, content hashes, Merkle trees). @noble/hashes by default:
// sandbox-safe, so workflow code hashes too. Processes install node:crypto's at start
// (platform/util/node-sha256.ts): the same bytes, about 5x faster on the hot paths (the
// aggregator's ids, a manifest's leaves).

import { sha256 } from '@noble/hashes/sha2.js';

/** SHA-256 of a string's UTF-8 bytes, or of bytes. */
export type Sha256 = (data: string | Uint8Array) => Uint8Array;

const encoder = new TextEncoder();
/** The pure implementation, the default. */
export const pureSha256: Sha256 = (data) => sha256(typeof data === 'string' ? encoder.encode(data) : data);
let impl: Sha256 = pureSha256;

/** SHA-256 of a string's UTF-8 bytes (an unpaired surrogate as U+FFFD), or of bytes. */
export const sha256Of = (data: string | Uint8Array): Uint8Array => impl(data);

/** Replaces the implementation; it must give the same bytes. */
export function useSha256(f: Sha256): void {
  impl = f;
}
