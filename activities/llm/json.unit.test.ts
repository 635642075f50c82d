import fc from 'fast-check';
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

describe('control characters inside strings (what constrained decoding lets through)', () => {
  it('are read as the characters they are; outside strings they are still refused', () => {
    expect(parseJsonReply('{"a": "x\ty\u0001", "b": ["\n"]}')).toEqual({
      ok: true,
      value: { a: 'x\ty\u0001', b: ['\n'] },
    });
    // An escaped quote does not end the string; an escaped backslash does not escape the quote.
    expect(parseJsonReply('{"a": "say \\"hi\u0002\\"", "b": "c:\\\\", "d": "\u001f"}')).toEqual({
      ok: true,
      value: { a: 'say "hi\u0002"', b: 'c:\\', d: '\u001f' },
    });
    expect(parseJsonReply('{"a": 1\u0001}').ok).toBe(false);
    expect(parseJsonReply('{"a": "unterminated\u0001').ok).toBe(false);
  });

  it('any JSON value with raw control characters put into its strings parses to that value', () => {
    const controls = fc.string({
      unit: fc.integer({ min: 0, max: 0x1f }).map((c) => String.fromCharCode(c)),
    });
    const text = fc.array(fc.oneof(fc.string(), controls), { maxLength: 4 }).map((parts) => parts.join(''));
    const value = fc.letrec((tie) => ({
      node: fc.oneof(
        { depthSize: 'small' },
        text,
        fc.integer(),
        fc.boolean(),
        fc.constant(null),
        fc.array(tie('node'), { maxLength: 4 }),
        fc.dictionary(text, tie('node'), { maxKeys: 4 }),
      ),
    })).node;
    fc.assert(
      fc.property(value, (v) => {
        // JSON.stringify escapes them; put them back raw, as a constrained decoder writes them.
        // Escapes are read whole, so an escaped backslash before an n stays what it is.
        const raw = JSON.stringify(v).replace(/\\(u[0-9a-f]{4}|.)/g, (m) => {
          const c = JSON.parse(`"${m}"`) as string;
          return c.length === 1 && c.charCodeAt(0) < 0x20 ? c : m;
        });
        expect(parseJsonReply(raw)).toEqual({ ok: true, value: v });
      }),
    );
  });
});
