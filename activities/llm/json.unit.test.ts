import { describe, expect, it } from 'vitest';
import { canonicalJson, hashValue, parseJsonReply } from './json.js';

describe('parseJsonReply', () => {
  it('accepts plain JSON, one ```json fence, and a leading <think> block', () => {
    expect(parseJsonReply('{"a": 1}')).toEqual({ ok: true, value: { a: 1 } });
    expect(parseJsonReply('  \n```json\n{"a": [1, 2]}\n```\n')).toEqual({ ok: true, value: { a: [1, 2] } });
    expect(parseJsonReply('```\n{"a": 2}\n```')).toEqual({ ok: true, value: { a: 2 } });
    expect(parseJsonReply('<think>plan the answer {x}</think>\n{"a": 3}')).toEqual({
      ok: true,
      value: { a: 3 },
    });
  });

  it('refuses prose around JSON, Python literals, trailing commas, comments and empty replies', () => {
    for (const bad of [
      'Here you go: {"a": 1}',
      '{"a": 1}\nHope this helps!',
      "{'a': 1}",
      '{"a": 1,}',
      '{"a": 1 // one\n}',
      '{"a": True}',
      '',
      '```json\n{"a": 1}\n``` and more',
      '{"a": 1',
    ]) {
      expect(parseJsonReply(bad).ok, bad).toBe(false);
    }
  });

  it('never evaluates the reply', () => {
    const g = globalThis as { rodsPwned?: boolean };
    const r = parseJsonReply('(() => { globalThis.rodsPwned = true; return {} })()');
    expect(r.ok).toBe(false);
    expect(g.rodsPwned).toBeUndefined();
  });
});

describe('hashing', () => {
  it('canonical JSON sorts keys at every level, so key order does not change the hash', () => {
    expect(canonicalJson({ b: 1, a: { d: [2, { z: 1, y: 2 }], c: null } })).toBe(
      '{"a":{"c":null,"d":[2,{"y":2,"z":1}]},"b":1}',
    );
    expect(hashValue({ x: 1, y: [1, 2] })).toBe(hashValue({ y: [1, 2], x: 1 }));
    expect(hashValue({ x: 1, y: [1, 2] })).not.toBe(hashValue({ x: 1, y: [2, 1] }));
    expect(hashValue({})).toBe('44136fa355b3678a1146ad16f7e8649e94fb4fc21fe77e8310c060f61caaff8a');
  });
});
