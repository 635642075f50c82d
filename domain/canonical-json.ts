// Canonical JSON and SHA-256 for the pure core, usable in Temporal's workflow sandbox (no
// node:crypto, no Buffer, no TextEncoder needed). The encoding is the one store/canonical.ts uses
// for the event hash chain: object keys sorted by UTF-16 code units (Array.prototype.sort), no
// whitespace, numbers and strings as JSON.stringify writes them; undefined object members are
// dropped and undefined array items become null; toJSON() is honoured. Non-finite numbers,
// bigints and values nested deeper than MAX_CANONICAL_DEPTH are refused (CanonicalJsonError).
import { sha256 } from '@noble/hashes/sha2.js';

export const MAX_CANONICAL_DEPTH = 256;

export class CanonicalJsonError extends TypeError {
  override name = 'CanonicalJsonError';
}

/** Options of the encoder: a check every string (keys included) must pass, e.g. what jsonb can store. */
export interface CanonicalOptions {
  checkString?: (s: string, path: string) => void;
}

function encode(value: unknown, path: string, depth: number, out: string[], opts: CanonicalOptions): boolean {
  if (depth > MAX_CANONICAL_DEPTH) {
    throw new CanonicalJsonError(`${path}: nested deeper than ${MAX_CANONICAL_DEPTH} levels`);
  }
  if (
    value !== null &&
    typeof value === 'object' &&
    typeof (value as { toJSON?: unknown }).toJSON === 'function'
  ) {
    value = (value as { toJSON: (key: string) => unknown }).toJSON('');
  }
  switch (typeof value) {
    case 'string':
      opts.checkString?.(value, path);
      out.push(JSON.stringify(value));
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
      if (!encode(value[i], `${path}[${i}]`, depth + 1, out, opts)) out.push('null');
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
    opts.checkString?.(k, `${path}.${k}`);
    out.push(first ? '' : ',', JSON.stringify(k), ':');
    if (encode(obj[k], `${path}.${k}`, depth + 1, out, opts)) first = false;
    else out.length = mark;
  }
  out.push('}');
  return true;
}

/** The canonical JSON text of a value; throws CanonicalJsonError. */
export function canonicalJson(value: unknown, path = '$', opts: CanonicalOptions = {}): string {
  const out: string[] = [];
  if (!encode(value, path, 0, out, opts))
    throw new CanonicalJsonError(`${path}: ${typeof value} is not JSON`);
  return out.join('');
}

/** UTF-8 bytes of a string; an unpaired surrogate becomes U+FFFD (as TextEncoder does). */
export function utf8Bytes(s: string): Uint8Array {
  const out: number[] = [];
  for (let i = 0; i < s.length; i++) {
    let c = s.charCodeAt(i);
    if (c >= 0xd800 && c <= 0xdbff) {
      const d = i + 1 < s.length ? s.charCodeAt(i + 1) : 0;
      if (d >= 0xdc00 && d <= 0xdfff) {
        c = 0x10000 + ((c - 0xd800) << 10) + (d - 0xdc00);
        i++;
      } else c = 0xfffd;
    } else if (c >= 0xdc00 && c <= 0xdfff) c = 0xfffd;
    if (c < 0x80) out.push(c);
    else if (c < 0x800) out.push(0xc0 | (c >> 6), 0x80 | (c & 63));
    else if (c < 0x10000) out.push(0xe0 | (c >> 12), 0x80 | ((c >> 6) & 63), 0x80 | (c & 63));
    else out.push(0xf0 | (c >> 18), 0x80 | ((c >> 12) & 63), 0x80 | ((c >> 6) & 63), 0x80 | (c & 63));
  }
  return Uint8Array.from(out);
}

const HEX = Array.from({ length: 256 }, (_, i) => i.toString(16).padStart(2, '0'));

/** SHA-256 (lowercase hex) of the UTF-8 bytes of a string. */
export function sha256Hex(text: string): string {
  const digest = sha256(utf8Bytes(text));
  let hex = '';
  for (const b of digest) hex += HEX[b];
  return hex;
}
