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
import { createHash } from 'node:crypto';

export class CanonicalJsonError extends TypeError {
  override name = 'CanonicalJsonError';
}

// A UTF-16 surrogate that is not part of a pair.
const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;

function str(s: string, path: string): string {
  if (s.includes('\u0000') || LONE_SURROGATE.test(s)) {
    throw new CanonicalJsonError(
      `${path}: string contains U+0000 or an unpaired surrogate, which jsonb cannot store`,
    );
  }
  return JSON.stringify(s);
}

function encode(value: unknown, path: string, out: string[]): boolean {
  if (
    value !== null &&
    typeof value === 'object' &&
    typeof (value as { toJSON?: unknown }).toJSON === 'function'
  ) {
    value = (value as { toJSON: (key: string) => unknown }).toJSON('');
  }
  switch (typeof value) {
    case 'string':
      out.push(str(value, path));
      return true;
    case 'number':
      if (!Number.isFinite(value)) throw new CanonicalJsonError(`${path}: ${value} is not a finite number`);
      out.push(JSON.stringify(value));
      return true;
    case 'boolean':
      out.push(value ? 'true' : 'false');
      return true;
    case 'bigint':
      throw new CanonicalJsonError(`${path}: bigint is not JSON; convert it to a number or a string`);
    case 'undefined':
    case 'function':
    case 'symbol':
      return false;
  }
  if (value === null) {
    out.push('null');
    return true;
  }
  if (Array.isArray(value)) {
    out.push('[');
    for (let i = 0; i < value.length; i++) {
      if (i > 0) out.push(',');
      if (!encode(value[i], `${path}[${i}]`, out)) out.push('null');
    }
    out.push(']');
    return true;
  }
  const obj = value as Record<string, unknown>;
  const keys = Object.keys(obj).sort();
  out.push('{');
  let first = true;
  for (const k of keys) {
    const mark = out.length;
    out.push(first ? '' : ',', str(k, `${path}.${k}`), ':');
    if (encode(obj[k], `${path}.${k}`, out)) first = false;
    else out.length = mark;
  }
  out.push('}');
  return true;
}

/** The canonical JSON text of a value (see the top of this file); throws CanonicalJsonError. */
export function canonicalJson(value: unknown, path = '$'): string {
  const out: string[] = [];
  if (!encode(value, path, out)) throw new CanonicalJsonError(`${path}: ${typeof value} is not JSON`);
  return out.join('');
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
