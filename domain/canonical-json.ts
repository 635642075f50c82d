// Canonical JSON and SHA-256 for the pure core, usable in Temporal's workflow sandbox (no
// node:crypto, no Buffer, no TextEncoder needed). The encoding is the one platform/store/events/canonical.ts uses
// for the event hash chain: object keys sorted by UTF-16 code units (Array.prototype.sort), no
// whitespace, numbers and strings as JSON.stringify writes them; undefined object members are
// dropped and undefined array items become null; toJSON() is honoured. Non-finite numbers,
// bigints and values nested deeper than MAX_CANONICAL_DEPTH are refused (CanonicalJsonError).
import { sha256Of } from './sha256.js';

export const MAX_CANONICAL_DEPTH = 256;

export class CanonicalJsonError extends TypeError {
  override name = 'CanonicalJsonError';
}

/** Options of the encoder: a check every string (keys included) must pass, e.g. what jsonb can store. */
export interface CanonicalOptions {
  /** Throws for a string it refuses; `path` builds the string's location for the message. */
  checkString?: (s: string, path: () => string) => void;
}

// Where a value sits ($.a.b[2]), built only when a check fails or a string check needs it: the
// hot path (the event store hashes every appended event) allocates no path strings.
interface Where {
  parent: Where | null;
  key: string | number;
}

function pathOf(root: string, w: Where | null): string {
  const parts: string[] = [];
  for (let n = w; n; n = n.parent) parts.push(typeof n.key === 'number' ? `[${n.key}]` : `.${n.key}`);
  return root + parts.reverse().join('');
}

// Object keys that passed checkString, per check function: events repeat the same few keys.
const checkedKeys = new WeakMap<NonNullable<CanonicalOptions['checkString']>, Set<string>>();
const MAX_CHECKED_KEYS = 4096;

class Encoder {
  private readonly keysOk: Set<string> | undefined;
  constructor(
    private readonly root: string,
    private readonly opts: CanonicalOptions,
  ) {
    const check = opts.checkString;
    if (check) {
      const set = checkedKeys.get(check) ?? new Set<string>();
      checkedKeys.set(check, set);
      this.keysOk = set;
    }
  }

  private fail(w: Where | null, what: string): never {
    throw new CanonicalJsonError(`${pathOf(this.root, w)}: ${what}`);
  }

  /**
   * An array of finite numbers, strings and nulls only (a statistics record's columns) as
   * JSON.stringify writes it, which is the same text the item-by-item path builds, in one call;
   * undefined for any other array (a hole, an object, a non-finite number: the item path decides).
   */
  private flatArray(a: unknown[], w: Where | null): string | undefined {
    const check = this.opts.checkString;
    for (let i = 0; i < a.length; i++) {
      const v = a[i];
      if (typeof v === 'number') {
        if (!Number.isFinite(v)) return undefined;
      } else if (typeof v === 'string') {
        if (check) check(v, () => pathOf(this.root, { parent: w, key: i }));
      } else if (v !== null) return undefined;
    }
    return JSON.stringify(a);
  }

  /** The value's canonical text, or undefined for what JSON drops (undefined, functions, symbols). */
  encode(value: unknown, w: Where | null, depth: number): string | undefined {
    if (depth > MAX_CANONICAL_DEPTH) this.fail(w, `nested deeper than ${MAX_CANONICAL_DEPTH} levels`);
    if (
      value !== null &&
      typeof value === 'object' &&
      typeof (value as { toJSON?: unknown }).toJSON === 'function'
    ) {
      value = (value as { toJSON: (key: string) => unknown }).toJSON('');
    }
    switch (typeof value) {
      case 'string':
        if (this.opts.checkString) this.opts.checkString(value, () => pathOf(this.root, w));
        return JSON.stringify(value);
      case 'number':
        if (!Number.isFinite(value)) this.fail(w, `${value} is not a finite number`);
        return JSON.stringify(value);
      case 'boolean':
        return value ? 'true' : 'false';
      case 'bigint':
        return this.fail(w, 'bigint is not JSON; convert it to a number or a string');
      case 'undefined':
      case 'function':
      case 'symbol':
        return undefined;
    }
    if (value === null) return 'null';
    if (Array.isArray(value)) {
      const flat = this.flatArray(value, w);
      if (flat !== undefined) return flat;
      let out = '[';
      for (let i = 0; i < value.length; i++) {
        if (i > 0) out += ',';
        out += this.encode(value[i], { parent: w, key: i }, depth + 1) ?? 'null';
      }
      return `${out}]`;
    }
    const obj = value as Record<string, unknown>;
    const keys = Object.keys(obj).sort();
    let out = '{';
    let first = true;
    for (const k of keys) {
      const at: Where = { parent: w, key: k };
      if (this.keysOk && !this.keysOk.has(k)) {
        this.opts.checkString!(k, () => pathOf(this.root, at));
        if (this.keysOk.size < MAX_CHECKED_KEYS) this.keysOk.add(k);
      }
      const text = this.encode(obj[k], at, depth + 1);
      if (text === undefined) continue;
      out += `${first ? '' : ','}${JSON.stringify(k)}:${text}`;
      first = false;
    }
    return `${out}}`;
  }
}

/** The canonical JSON text of a value; throws CanonicalJsonError. */
export function canonicalJson(value: unknown, path = '$', opts: CanonicalOptions = {}): string {
  const text = new Encoder(path, opts).encode(value, null, 0);
  if (text === undefined) throw new CanonicalJsonError(`${path}: ${typeof value} is not JSON`);
  return text;
}

const encoder = new TextEncoder();

/** UTF-8 bytes of a string; an unpaired surrogate becomes U+FFFD (as TextEncoder does). */
export function utf8Bytes(s: string): Uint8Array {
  return encoder.encode(s);
}

const HEX = Array.from({ length: 256 }, (_, i) => i.toString(16).padStart(2, '0'));

/** SHA-256 (lowercase hex) of the UTF-8 bytes of a string. */
export function sha256Hex(text: string): string {
  const digest = sha256Of(text);
  let hex = '';
  for (const b of digest) hex += HEX[b];
  return hex;
}
