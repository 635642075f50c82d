import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import {
  codePointLength,
  type Literal,
  literalToJson,
  MAX_CALL_CHARS,
  MAX_NESTING,
  type ParsedCall,
  parseCall,
} from './call-parser.js';

function ok(src: string): ParsedCall {
  const r = parseCall(src);
  if (!r.ok) throw new Error(`expected ${JSON.stringify(src)} to parse: ${r.reason}`);
  return r.call;
}

function rejected(src: unknown): string {
  const r = parseCall(src);
  if (r.ok) throw new Error(`expected ${JSON.stringify(src)} to be refused, got ${JSON.stringify(r.call)}`);
  return r.reason;
}

const json = (c: ParsedCall) => ({
  name: c.name,
  args: c.args.map(literalToJson),
  kwargs: Object.fromEntries(c.kwargs.map((k) => [k.name, literalToJson(k.value)])),
});

describe('parseCall accepts the literal-only call subset', () => {
  it('parses BFCL ground-truth calls into names, positional and keyword literals', () => {
    expect(json(ok("cd(folder='document')"))).toEqual({
      name: 'cd',
      args: [],
      kwargs: { folder: 'document' },
    });
    expect(json(ok("sort('final_report.pdf')"))).toEqual({
      name: 'sort',
      args: ['final_report.pdf'],
      kwargs: {},
    });
    expect(json(ok("lockDoors(unlock=False, door=['driver', 'passenger'])"))).toEqual({
      name: 'lockDoors',
      args: [],
      kwargs: { unlock: false, door: ['driver', 'passenger'] },
    });
    expect(json(ok("post_tweet(content='x', tags = ['#a'], mentions=['@b'])")).kwargs).toEqual({
      content: 'x',
      tags: ['#a'],
      mentions: ['@b'],
    });
    expect(json(ok('ls()'))).toEqual({ name: 'ls', args: [], kwargs: {} });
    expect(json(ok('  ls(a=True)  \n'))).toEqual({ name: 'ls', args: [], kwargs: { a: true } });
  });

  it('reads numbers as Python does', () => {
    const k = json(
      ok('f(a=-1.5e3, b=0x1F, c=0o17, d=0b101, e=1_000, f=.5, g=5., h=+2, i=0, j=00, k=1E-2, l=- 3)'),
    ).kwargs;
    expect(k).toEqual({
      a: -1500,
      b: 31,
      c: 15,
      d: 5,
      e: 1000,
      f: 0.5,
      g: 5,
      h: 2,
      i: 0,
      j: 0,
      k: 0.01,
      l: -3,
    });
    const n = ok('f(-0.0)').args[0] as Extract<Literal, { type: 'num' }>;
    expect(n.text).toBe('-0.0');
  });

  it('reads strings with every quoting, prefix, escape and implicit concatenation', () => {
    const k = json(
      ok(
        `f(a="it's", b='say "hi"', c='''tri\nple''', d="""x""", e='a' "b" r'\\d', f=r'\\n', g=u'z', h='\\x41\\u00e9\\U0001F600\\101\\n\\t\\\\', i='\\q', j='a\\\nb')`,
      ),
    ).kwargs;
    expect(k).toEqual({
      a: "it's",
      b: 'say "hi"',
      c: 'tri\nple',
      d: 'x',
      e: 'ab\\d',
      f: '\\n',
      g: 'z',
      h: 'Aé😀A\n\t\\',
      i: '\\q',
      j: 'ab',
    });
  });

  it('reads lists, tuples, parenthesized values and dicts, with trailing commas and line breaks', () => {
    const c = ok(
      "f(\n  a=[1, [2, 3],],\n  b=(1,),\n  c=(2),\n  d=(),\n  e={'k': {'n': None}, 1: 'one', True: 2,},\n  f={},\n)",
    );
    expect(json(c).kwargs).toEqual({
      a: [1, [2, 3]],
      b: [1],
      c: 2,
      d: [],
      e: { k: { n: null }, 1: 'one', true: 2 },
      f: {},
    });
    expect(c.kwargs[1]!.value.type).toBe('tuple');
    expect(c.kwargs[2]!.value.type).toBe('num');
  });

  it('allows comments and backslash continuations as whitespace', () => {
    expect(json(ok('f(a=1) # a comment'))).toEqual({ name: 'f', args: [], kwargs: { a: 1 } });
    expect(json(ok('f(a=1, # first\n b=2)')).kwargs).toEqual({ a: 1, b: 2 });
    expect(json(ok('f(a=\\\n1)')).kwargs).toEqual({ a: 1 });
  });

  it('gives dict keys that are JSON-unsafe as own properties', () => {
    const v = literalToJson(ok("f(a={'__proto__': 1, 'constructor': 2})").kwargs[0]!.value) as Record<
      string,
      number
    >;
    expect(Object.keys(v)).toEqual(['__proto__', 'constructor']);
    expect(Object.getOwnPropertyDescriptor(v, '__proto__')?.value).toBe(1);
    expect(JSON.stringify(v)).toBe('{"__proto__":1,"constructor":2}');
  });
});

describe('parseCall refuses everything that is not a literal call', () => {
  it.each([
    ["os.system('rm -rf /')", /method calls on objects/],
    ["__import__('os')", /underscore/],
    ["_private('x')", /underscore/],
    ['f(a=b)', /the name "b" is not allowed/],
    ['f(a=__file__)', /the name "__file__" is not allowed/],
    ["f(a=open('/etc/passwd').read())", /a call is not allowed/],
    ["f(a=eval('1'))", /a call is not allowed/],
    ['f()()', /calling the result of a call/],
    ['f().x', /no attribute or subscript/],
    ['f(a=1); import os', /only a single function call/],
    ['f(a=1)\ng()', /only a single function call/],
    ['f(1, a=2, 3)', /positional argument follows a keyword/],
    ['f(a=1, a=2)', /given twice/],
    ['f(a={1, 2})', /a set is not allowed/],
    ['f(a={1})', /a set is not allowed/],
    ['f(a={**x})', /\*\* unpacking/],
    ['f(a={-1: 2})', /dict keys must be string or number/],
    ['f(a={None: 2})', /dict keys must be string or number/],
    ['f(a=1+2)', /operator expression/],
    ["f(a='x' * 1000)", /operator expression/],
    ['f(a=not 1)', /the name "not" is not allowed/],
    ['f(a=[x for x in y])', /the name "x" is not allowed/],
    ["f(a=['x' for _ in 'y'])", /not allowed after a literal/],
    ['f(a=1 if 1 else 2)', /not allowed after a literal/],
    ['f(a=lambda: 1)', /lambda/],
    ['f(*a)', /unpacking/],
    ['f(**a)', /unpacking/],
    ["f(a=b'x')", /bytes/],
    ["f(a=f'{x}')", /f-strings/],
    ["f(a=rb'x')", /bytes/],
    ['f(a=1j)', /complex/],
    ['f(a=007)', /leading zeros/],
    ['f(a=1e999)', /not finite/],
    ['f(a=--1)', /a sign is allowed only in front of a number/],
    ['f(a=-True)', /a sign is allowed only in front of a number/],
    ["f(a='x'.upper())", /attribute access/],
    ["f(a='x'[0])", /subscript/],
    ["f(a='\\N{BULLET}')", /\\N\{...\} escapes/],
    ["f(a='\\x4')", /truncated \\x escape/],
    ["f(a='\\U00110000')", /not a Unicode code point/],
    ["f(a='unterminated)", /unterminated string/],
    ["f(a='line\nbreak')", /line break inside/],
    ["f(a=r'\\')", /unterminated string/],
    ['f(a=[1, 2', /missing \]/],
    ['f(a=1', /missing \)/],
    ['f(a=1 b=2)', /is not allowed after a literal/],
    ['f(a=[1 2])', /expected , or \]/],
    ['f\n()', /not followed by \(/],
    ['f', /not followed by \(/],
    ['', /empty call string/],
    ['   ', /empty call string/],
    ['1(a=1)', /expected a function name/],
    ["'f'()", /expected a function name/],
    ['if(a=1)', /Python keyword/],
    ['True()', /Python keyword/],
    ['f(True=1)', /Python keyword, not an argument name/],
    ['f(_a=1)', /argument name "_a" starts with an underscore/],
    ['fé(a=1)', /not followed by \(/],
    ['éf(a=1)', /ASCII identifier/],
    ['f(a=1 == 2)', /operator expression/],
    ['f(a=(yield))', /the name "yield" is not allowed/],
    ['f(a=[*x])', /does not start a literal/],
  ])('%j', (src, reason) => {
    expect(rejected(src)).toMatch(reason);
  });

  const hasControlCharacter = (s: string) => [...s].some((ch) => ch.charCodeAt(0) < 0x20);

  it('refuses non-strings and over-long input before parsing', () => {
    expect(rejected(42)).toMatch(/must be a string, got number/);
    expect(rejected(null)).toMatch(/must be a string/);
    expect(rejected(`f(a='${'x'.repeat(MAX_CALL_CHARS)}')`)).toMatch(/exceeds the limit of 20000/);
  });

  it('bounds nesting without deep recursion', () => {
    const depth = (d: number) => `f(a=${'['.repeat(d)}1${']'.repeat(d)})`;
    expect(json(ok(depth(MAX_NESTING))).kwargs.a).toBeDefined();
    expect(rejected(depth(MAX_NESTING + 1))).toMatch(/nested deeper than 20/);
    expect(rejected(depth(9000))).toMatch(/nested deeper than 20/);
    expect(rejected(`f(a=${'('.repeat(9000)}1${')'.repeat(9000)})`)).toMatch(/nested deeper than 20/);
    expect(rejected(`f(a=${'{"k":'.repeat(3000)}1${'}'.repeat(3000)})`)).toMatch(/nested deeper than 20/);
  });

  it('quotes at most a short, escaped snippet of hostile input in its reasons', () => {
    const hostile = `f(a=${'\u0000\u001b[31m'.repeat(5000)})`;
    const reason = rejected(hostile);
    expect(reason.length).toBeLessThan(200);
    expect(hasControlCharacter(reason)).toBe(false);
    const longName = `${'x'.repeat(5000)}.y()`;
    expect(rejected(longName).length).toBeLessThan(200);
  });
});

describe('agreement with the executor parser (executor/parser.py)', () => {
  const fixture = JSON.parse(
    readFileSync(new URL('./fixtures/call-parser-differential.json', import.meta.url), 'utf8'),
  ) as {
    cases: (
      | { src: string; ok: true; name: string; args: unknown[]; kwargs: Record<string, unknown> }
      | { src: string; ok: false; executorReason: string }
    )[];
  };

  it('has a fixture with both verdicts', () => {
    expect(fixture.cases.filter((c) => c.ok).length).toBeGreaterThan(150);
    expect(fixture.cases.filter((c) => !c.ok).length).toBeGreaterThan(150);
  });

  it('accepts exactly what the executor accepts, with the same values, on real and mutated BFCL calls', () => {
    const mismatches: string[] = [];
    for (const c of fixture.cases) {
      const r = parseCall(c.src);
      if (c.ok) {
        if (!r.ok) mismatches.push(`refused ${JSON.stringify(c.src)}: ${r.reason}`);
        else if (
          JSON.stringify(json(r.call)) !== JSON.stringify({ name: c.name, args: c.args, kwargs: c.kwargs })
        ) {
          mismatches.push(`values differ for ${JSON.stringify(c.src)}: ${JSON.stringify(json(r.call))}`);
        }
      } else if (r.ok) {
        mismatches.push(`accepted ${JSON.stringify(c.src)} (executor: ${c.executorReason})`);
      }
    }
    expect(mismatches).toEqual([]);
  });
});

describe('codePointLength', () => {
  it("counts Unicode code points, as Python's len", () => {
    expect(codePointLength('')).toBe(0);
    expect(codePointLength('abc')).toBe(3);
    expect(codePointLength('é')).toBe(1);
    expect(codePointLength('😀😀')).toBe(2);
    expect('😀😀'.length).toBe(4);
    expect(codePointLength('\ud800x')).toBe(2); // a lone surrogate counts once
    expect(codePointLength('x\udc00')).toBe(2);
  });
});
