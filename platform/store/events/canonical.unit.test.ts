import { describe, expect, it } from 'vitest';
import {
  CanonicalJsonError,
  canonicalEventJson,
  canonicalJson,
  chainHash,
  GENESIS_HASH,
} from './canonical.js';

describe('canonicalJson', () => {
  it('sorts keys at every depth and writes no whitespace', () => {
    expect(canonicalJson({ b: 1, a: { d: [3, { z: 1, y: 2 }], c: null } })).toBe(
      '{"a":{"c":null,"d":[3,{"y":2,"z":1}]},"b":1}',
    );
  });

  it('sorts keys by UTF-16 code units, independent of insertion order', () => {
    const a = { é: 1, z: 2, Z: 3, '10': 4, '9': 5, 𝔸: 6, ﬀ: 7 };
    const b = Object.fromEntries(Object.entries(a).reverse());
    expect(canonicalJson(a)).toBe(canonicalJson(b));
    // Integer-like keys are not put first the way JS objects enumerate them.
    expect(canonicalJson(a)).toBe('{"10":4,"9":5,"Z":3,"z":2,"é":1,"𝔸":6,"ﬀ":7}');
  });

  it('writes numbers in shortest round-trip form', () => {
    expect(canonicalJson([1.0, -0, 0.1 + 0.2, 1e21, 1.5e-7, 2 ** 53 + 2, 5e-324])).toBe(
      '[1,0,0.30000000000000004,1e+21,1.5e-7,9007199254740994,5e-324]',
    );
  });

  it('follows JSON.stringify for undefined, toJSON and escapes', () => {
    const d = new Date('2026-01-02T03:04:05.678Z');
    expect(canonicalJson({ a: undefined, b: [undefined, () => 1], d, s: 'q"\\\n\u0001é😀' })).toBe(
      `{"b":[null,null],"d":"2026-01-02T03:04:05.678Z","s":${JSON.stringify('q"\\\n\u0001é😀')}}`,
    );
  });

  it('refuses what jsonb cannot keep', () => {
    for (const bad of [Number.NaN, Number.POSITIVE_INFINITY, 1n, 'a\u0000b', 'x\uD800', '\uDC00y']) {
      expect(() => canonicalJson({ v: [bad] }), String(bad)).toThrow(CanonicalJsonError);
    }
    expect(() => canonicalJson(undefined)).toThrow(CanonicalJsonError);
    expect(() => canonicalJson({ 'k\u0000': 1 })).toThrow(CanonicalJsonError);
    expect(canonicalJson('😀')).toBe('"😀"');
  });

  it('names the path of the offending value', () => {
    expect(() => canonicalJson({ rewards: [0.5, Number.NaN] }, '$.payload')).toThrow('$.payload.rewards[1]');
    expect(() => canonicalJson({ a: { b: ['ok', 'x\uD800'] } }, '$.payload')).toThrow('$.payload.a.b[1]');
    expect(() => canonicalJson({ a: { 'k\u0000': 1 } }, '$.metadata')).toThrow('$.metadata.a.k');
  });

  it('checks every key, however often a key that passed comes again', () => {
    for (let i = 0; i < 3; i++) {
      expect(canonicalJson({ taskId: 't', step: i })).toBe(`{"step":${i},"taskId":"t"}`);
      expect(() => canonicalJson({ taskId: 't', 'bad\uDC00': i })).toThrow(CanonicalJsonError);
    }
  });
});

describe('event hashing', () => {
  it('canonicalEventJson is the canonical JSON of the hashed fields', () => {
    const f = {
      streamId: 'task-φ',
      version: 3,
      eventId: '0b0e6f5e-8d1f-4c57-9a3c-2f0c9a1e6b11',
      type: 'TaskStatsUpdated',
      fingerprint: '00ff00ff00ff00ff',
      payload: { mean: 0.5, band: 'boundary' },
      metadata: { producer: 'agg-1', correlationId: 'c' },
    };
    expect(canonicalEventJson(f)).toBe(canonicalJson(f));
    expect(canonicalEventJson(f, canonicalJson(f.payload), canonicalJson(f.metadata))).toBe(canonicalJson(f));
  });

  it('chains sha256(prev || UTF-8 canonical bytes)', () => {
    // Vector computed independently: sha256(32 zero bytes || '{"a":1,"b":"φ"}').
    expect(chainHash(GENESIS_HASH, canonicalJson({ b: 'φ', a: 1 })).toString('hex')).toBe(
      'd7e87c18e1e1e5c8372ec597402a66f5ea1e9aeffdd13fc2c232dbf4b9518a1e',
    );
    expect(GENESIS_HASH).toEqual(Buffer.alloc(32));
  });
});
