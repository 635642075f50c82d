import { createHash } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { canonicalJson as storeCanonicalJson } from '../platform/store/events/canonical.js';
import {
  CanonicalJsonError,
  canonicalJson,
  MAX_CANONICAL_DEPTH,
  sha256Hex,
  utf8Bytes,
} from './canonical-json.js';

function mulberry32(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const ALPHABET = [
  'a',
  'Z',
  '0',
  ' ',
  '"',
  '\\',
  '\n',
  '\t',
  'é',
  '中',
  '😀',
  '\u2028',
  '\u007f',
  '_',
  '{',
  '}',
];

function randomString(rnd: () => number, max = 12): string {
  let s = '';
  const n = Math.floor(rnd() * max);
  for (let i = 0; i < n; i++) s += ALPHABET[Math.floor(rnd() * ALPHABET.length)];
  return s;
}

function randomJson(rnd: () => number, depth = 0): unknown {
  const r = rnd();
  if (depth > 4 || r < 0.3) {
    const k = Math.floor(rnd() * 6);
    if (k === 0) return randomString(rnd);
    if (k === 1) return Math.floor(rnd() * 2000) - 1000;
    if (k === 2) return (rnd() - 0.5) * 1e6;
    if (k === 3) return rnd() < 0.5;
    if (k === 4) return null;
    return rnd() * 1e-7;
  }
  if (r < 0.6) return Array.from({ length: Math.floor(rnd() * 4) }, () => randomJson(rnd, depth + 1));
  const o: Record<string, unknown> = {};
  for (let i = Math.floor(rnd() * 5); i > 0; i--) o[randomString(rnd, 6)] = randomJson(rnd, depth + 1);
  return o;
}

describe('canonicalJson', () => {
  it('sorts keys, drops whitespace and undefined members, writes numbers as JSON does', () => {
    expect(canonicalJson({ b: 1, a: [1, 'x', null, true], c: { z: 1e21, y: -0.5 }, d: undefined })).toBe(
      '{"a":[1,"x",null,true],"b":1,"c":{"y":-0.5,"z":1e+21}}',
    );
    expect(canonicalJson([undefined, () => 1])).toBe('[null,null]');
    expect(canonicalJson({ toJSON: () => ({ b: 2, a: 1 }) })).toBe('{"a":1,"b":2}');
    expect(canonicalJson(JSON.parse('{"__proto__":{"x":1},"a":2}'))).toBe('{"__proto__":{"x":1},"a":2}');
  });

  it('refuses values that are not JSON', () => {
    expect(() => canonicalJson({ a: Number.NaN })).toThrow(CanonicalJsonError);
    expect(() => canonicalJson({ a: Number.POSITIVE_INFINITY })).toThrow(
      /\$\.a: Infinity is not a finite number/,
    );
    expect(() => canonicalJson({ a: 1n })).toThrow(/bigint/);
    expect(() => canonicalJson(undefined)).toThrow(/undefined is not JSON/);
  });

  it('refuses absurd nesting with an error instead of overflowing the stack', () => {
    let deep: unknown = 1;
    for (let i = 0; i < 100_000; i++) deep = [deep];
    expect(() => canonicalJson(deep)).toThrow(/nested deeper than 256 levels/);
    let ok: unknown = 1;
    for (let i = 0; i < MAX_CANONICAL_DEPTH; i++) ok = [ok];
    expect(canonicalJson(ok)).toBe(`${'['.repeat(MAX_CANONICAL_DEPTH)}1${']'.repeat(MAX_CANONICAL_DEPTH)}`);
  });

  it('writes an array of numbers, strings and nulls in one call, as item by item, and still checks every item', () => {
    const rnd = mulberry32(7);
    const itemByItem = (a: unknown[]) => `[${a.map((v) => JSON.stringify(v)).join(',')}]`;
    for (let i = 0; i < 500; i++) {
      const a = Array.from({ length: Math.floor(rnd() * 20) }, () => {
        const k = Math.floor(rnd() * 5);
        return k === 0
          ? randomString(rnd)
          : k === 1
            ? null
            : k === 2
              ? -0
              : (rnd() - 0.5) * 10 ** (rnd() * 40 - 20);
      });
      expect(canonicalJson(a)).toBe(itemByItem(a));
    }
    expect(() => canonicalJson({ m: [0.5, Number.NaN] })).toThrow(/\$\.m\[1\]: NaN is not a finite number/);
    expect(() => storeCanonicalJson({ id: ['a', 'b\u0000'] })).toThrow(
      /\$\.id\[1\]: string contains U\+0000/,
    );
    // A hole or an object sends the array down the item path.
    const holed = [1, 2];
    holed.length = 4;
    expect(canonicalJson(holed)).toBe('[1,2,null,null]');
    expect(canonicalJson([1, { b: 1, a: 2 }])).toBe('[1,{"a":2,"b":1}]');
  });

  it('is the encoding of the event store hash chain (platform/store/events/canonical.ts) on any JSON value', () => {
    const rnd = mulberry32(42);
    for (let i = 0; i < 2000; i++) {
      const v = randomJson(rnd);
      expect(canonicalJson(v)).toBe(storeCanonicalJson(v));
    }
  });
});

describe('sha256Hex', () => {
  it('matches the FIPS 180-2 test vectors', () => {
    expect(sha256Hex('')).toBe('e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855');
    expect(sha256Hex('abc')).toBe('ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad');
    expect(sha256Hex('abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq')).toBe(
      '248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1',
    );
    expect(sha256Hex('a'.repeat(1_000_000))).toBe(
      'cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0',
    );
  });

  it('agrees with node:crypto on UTF-8 text, including astral and unpaired surrogates', () => {
    const rnd = mulberry32(7);
    const extra = ['\ud800', '\udfff', 'x\ud83d', '\ud83d\ude00', '\u0000'];
    for (let i = 0; i < 500; i++) {
      const s = randomString(rnd, 80) + (i % 5 === 0 ? extra[i % extra.length] : '');
      expect(sha256Hex(s)).toBe(createHash('sha256').update(s, 'utf8').digest('hex'));
      expect(Buffer.from(utf8Bytes(s))).toEqual(Buffer.from(s, 'utf8'));
    }
  });
});
