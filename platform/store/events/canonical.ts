// Canonical bytes of an event for its hash chain. The encoding is JSON with object keys sorted
// (by UTF-16 code units, as Array.prototype.sort does), no whitespace, numbers in ECMAScript's
// shortest round-trip form and strings as JSON.stringify writes them, encoded as UTF-8.
//
// It is chosen so that a value read back from a jsonb column encodes to the same bytes as the
// value that was appended: jsonb reorders keys (we sort them), keeps a number's decimal digits
// exactly (parsing them back gives the same double) and keeps strings code point for code
// point. Values jsonb cannot keep are refused up front instead of being changed silently:
// non-finite numbers, bigints, strings with U+0000 or unpaired surrogates, and
// undefined/functions/symbols at the top level. Elsewhere it follows JSON.stringify: toJSON() is
// honoured, undefined object members are dropped and undefined array items become null.
// The encoder itself is the pure core's (domain/canonical-json.ts); this adds jsonb's limits.
import { createHash } from 'node:crypto';
import { CanonicalJsonError, canonicalJson as domainCanonicalJson } from '../../../domain/canonical-json.js';

export { CanonicalJsonError };

// A UTF-16 surrogate that is not part of a pair.
const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;
// What could be refused at all: most strings have neither, and this test is cheaper.
// biome-ignore lint/suspicious/noControlCharactersInRegex: U+0000 is what it looks for
const SUSPECT = /[\u0000\uD800-\uDFFF]/;

/** Strings jsonb cannot keep are refused rather than changed silently. */
function jsonbString(s: string, path: () => string): void {
  if (SUSPECT.test(s) && (s.includes('\u0000') || LONE_SURROGATE.test(s))) {
    throw new CanonicalJsonError(
      `${path()}: string contains U+0000 or an unpaired surrogate, which jsonb cannot store`,
    );
  }
}

function str(s: string, path: string): string {
  jsonbString(s, () => path);
  return JSON.stringify(s);
}

/** The canonical JSON text of a value (see the top of this file); throws CanonicalJsonError. */
export function canonicalJson(value: unknown, path = '$'): string {
  return domainCanonicalJson(value, path, { checkString: jsonbString });
}

/** The fields of an event that its hash covers. */
export interface HashedFields {
  streamId: string;
  version: number;
  eventId: string;
  type: string;
  fingerprint: string;
  payload: unknown;
  metadata: unknown;
}

/**
 * Canonical JSON of the hashed fields. payloadJson/metadataJson may be passed when the caller
 * has already encoded them with canonicalJson (the append path does, to store the same text).
 */
export function canonicalEventJson(f: HashedFields, payloadJson?: string, metadataJson?: string): string {
  // Keys in sorted order: eventId, fingerprint, metadata, payload, streamId, type, version.
  return (
    `{"eventId":${str(f.eventId, '$.eventId')}` +
    `,"fingerprint":${str(f.fingerprint, '$.fingerprint')}` +
    `,"metadata":${metadataJson ?? canonicalJson(f.metadata, '$.metadata')}` +
    `,"payload":${payloadJson ?? canonicalJson(f.payload, '$.payload')}` +
    `,"streamId":${str(f.streamId, '$.streamId')}` +
    `,"type":${str(f.type, '$.type')}` +
    `,"version":${canonicalJson(f.version)}}`
  );
}

export const HASH_BYTES = 32;
/** prev_hash of the first event of every stream. */
export const GENESIS_HASH: Buffer = Buffer.alloc(HASH_BYTES);

/** sha256(prevHash || UTF-8 bytes of the canonical JSON). */
export function chainHash(prevHash: Buffer, canonical: string): Buffer {
  return createHash('sha256').update(prevHash).update(canonical, 'utf8').digest();
}
