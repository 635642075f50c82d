// Reads and writes BFCL call strings (`mv(source='a.txt', destination='b')`) as data: a small
// recursive-descent parser of Python call syntax with literal arguments only (strings, numbers,
// True/False/None, lists, tuples, dicts), and the matching printer. Nothing is evaluated; the
// stand-in generator uses it to rename and vary arguments of real seed calls.

export type PyValue =
  | { t: 'str'; v: string }
  | { t: 'num'; text: string }
  | { t: 'bool'; v: boolean }
  | { t: 'none' }
  | { t: 'list'; items: PyValue[]; tuple?: boolean }
  | { t: 'dict'; entries: [PyValue, PyValue][] };

export interface PyCall {
  name: string;
  args: PyValue[];
  kwargs: [string, PyValue][];
}

export class PyParseError extends Error {
  override name = 'PyParseError';
}

const MAX_DEPTH = 20;

class Parser {
  i = 0;
  constructor(readonly s: string) {}

  fail(msg: string): never {
    throw new PyParseError(`${msg} at column ${this.i} of ${JSON.stringify(this.s.slice(0, 120))}`);
  }
  ws(): void {
    while (this.i < this.s.length && /\s/.test(this.s[this.i]!)) this.i++;
  }
  peek(): string {
    this.ws();
    return this.s[this.i] ?? '';
  }
  eat(ch: string): void {
    if (this.peek() !== ch) this.fail(`expected ${JSON.stringify(ch)}`);
    this.i++;
  }
  ident(): string {
    this.ws();
    const m = /^[A-Za-z_][A-Za-z0-9_]*/.exec(this.s.slice(this.i));
    if (!m) this.fail('expected a name');
    this.i += m[0].length;
    return m[0];
  }

  call(): PyCall {
    const name = this.ident();
    this.eat('(');
    const args: PyValue[] = [];
    const kwargs: [string, PyValue][] = [];
    while (this.peek() !== ')') {
      const save = this.i;
      const m = /^\s*([A-Za-z_][A-Za-z0-9_]*)\s*=(?!=)/.exec(this.s.slice(this.i));
      if (m && !['True', 'False', 'None'].includes(m[1]!)) {
        this.i += m[0].length;
        if (kwargs.some(([k]) => k === m[1])) this.fail(`repeated keyword ${m[1]}`);
        kwargs.push([m[1]!, this.value(0)]);
      } else {
        this.i = save;
        if (kwargs.length) this.fail('positional argument after keyword argument');
        args.push(this.value(0));
      }
      if (this.peek() === ',') this.i++;
      else if (this.peek() !== ')') this.fail('expected "," or ")"');
    }
    this.eat(')');
    this.ws();
    if (this.i !== this.s.length) this.fail('unexpected text after the call');
    return { name, args, kwargs };
  }

  value(depth: number): PyValue {
    if (depth > MAX_DEPTH) this.fail('nested too deep');
    const c = this.peek();
    if (c === "'" || c === '"') {
      let v = this.string();
      // Adjacent literals concatenate, as in Python.
      while (this.peek() === "'" || this.peek() === '"') v += this.string();
      return { t: 'str', v };
    }
    if (c === '[') return { t: 'list', items: this.seq(']', depth) };
    if (c === '(') return { t: 'list', items: this.seq(')', depth), tuple: true };
    if (c === '{') return this.dict(depth);
    if (/[-+0-9.]/.test(c)) return this.number();
    const word = this.ident();
    if (word === 'True') return { t: 'bool', v: true };
    if (word === 'False') return { t: 'bool', v: false };
    if (word === 'None') return { t: 'none' };
    this.fail(`${word} is not a literal`);
  }

  seq(close: string, depth: number): PyValue[] {
    this.i++;
    const items: PyValue[] = [];
    while (this.peek() !== close) {
      items.push(this.value(depth + 1));
      if (this.peek() === ',') this.i++;
      else if (this.peek() !== close) this.fail(`expected "," or ${JSON.stringify(close)}`);
    }
    this.i++;
    return items;
  }

  dict(depth: number): PyValue {
    this.i++;
    const entries: [PyValue, PyValue][] = [];
    while (this.peek() !== '}') {
      const k = this.value(depth + 1);
      this.eat(':');
      entries.push([k, this.value(depth + 1)]);
      if (this.peek() === ',') this.i++;
      else if (this.peek() !== '}') this.fail('expected "," or "}"');
    }
    this.i++;
    return { t: 'dict', entries };
  }

  number(): PyValue {
    this.ws();
    const m = /^[-+]?\s*(?:\d[\d_]*\.?[\d_]*(?:[eE][-+]?\d+)?|\.\d[\d_]*(?:[eE][-+]?\d+)?)/.exec(
      this.s.slice(this.i),
    );
    if (!m) this.fail('expected a number');
    this.i += m[0].length;
    return { t: 'num', text: m[0].replace(/\s+/g, '') };
  }

  string(): string {
    const q = this.s[this.i]!;
    const triple = this.s.startsWith(q.repeat(3), this.i);
    const end = triple ? q.repeat(3) : q;
    this.i += end.length;
    let out = '';
    for (;;) {
      if (this.i >= this.s.length) this.fail('unterminated string');
      if (this.s.startsWith(end, this.i)) {
        this.i += end.length;
        return out;
      }
      const ch = this.s[this.i]!;
      if (ch === '\n' && !triple) this.fail('newline in a string');
      if (ch !== '\\') {
        out += ch;
        this.i++;
        continue;
      }
      const e = this.s[this.i + 1] ?? '';
      this.i += 2;
      const simple: Record<string, string> = {
        n: '\n',
        t: '\t',
        r: '\r',
        '\\': '\\',
        "'": "'",
        '"': '"',
        '0': '\0',
        a: '\x07',
        b: '\b',
        f: '\f',
        v: '\v',
        '\n': '',
      };
      if (e in simple) out += simple[e];
      else if (e === 'x' || e === 'u' || e === 'U') {
        const len = e === 'x' ? 2 : e === 'u' ? 4 : 8;
        const hex = this.s.slice(this.i, this.i + len);
        if (!/^[0-9a-fA-F]+$/.test(hex) || hex.length !== len) this.fail(`bad \\${e} escape`);
        out += String.fromCodePoint(Number.parseInt(hex, 16));
        this.i += len;
      } else out += `\\${e}`; // Python keeps unknown escapes as written
    }
  }
}

/** Parses one call string (throws PyParseError). */
export function parseCall(source: string): PyCall {
  return new Parser(source.trim()).call();
}

export function tryParseCall(source: string): PyCall | null {
  try {
    return parseCall(source);
  } catch {
    return null;
  }
}

/** A Python string literal, as repr() writes it. */
export function pyString(s: string): string {
  const q = s.includes("'") && !s.includes('"') ? '"' : "'";
  let out = q;
  for (const ch of s) {
    const code = ch.codePointAt(0)!;
    if (ch === '\\') out += '\\\\';
    else if (ch === q) out += `\\${q}`;
    else if (ch === '\n') out += '\\n';
    else if (ch === '\r') out += '\\r';
    else if (ch === '\t') out += '\\t';
    else if (code < 0x20 || code === 0x7f) out += `\\x${code.toString(16).padStart(2, '0')}`;
    else out += ch;
  }
  return out + q;
}

export function formatValue(v: PyValue): string {
  switch (v.t) {
    case 'str':
      return pyString(v.v);
    case 'num':
      return v.text;
    case 'bool':
      return v.v ? 'True' : 'False';
    case 'none':
      return 'None';
    case 'list': {
      const inner = v.items.map(formatValue).join(', ');
      if (!v.tuple) return `[${inner}]`;
      return v.items.length === 1 ? `(${inner},)` : `(${inner})`;
    }
    case 'dict':
      return `{${v.entries.map(([k, x]) => `${formatValue(k)}: ${formatValue(x)}`).join(', ')}}`;
  }
}

export function formatCall(c: PyCall): string {
  const parts = [...c.args.map(formatValue), ...c.kwargs.map(([k, v]) => `${k}=${formatValue(v)}`)];
  return `${c.name}(${parts.join(', ')})`;
}

/** The value as plain JSON-like data (numbers as JS numbers). */
export function toPlain(v: PyValue): unknown {
  switch (v.t) {
    case 'str':
      return v.v;
    case 'num':
      return Number(v.text.replace(/_/g, ''));
    case 'bool':
      return v.v;
    case 'none':
      return null;
    case 'list':
      return v.items.map(toPlain);
    case 'dict':
      return Object.fromEntries(v.entries.map(([k, x]) => [String(toPlain(k)), toPlain(x)]));
  }
}

export const isFloatText = (text: string): boolean => /[.eE]/.test(text);

/** A number literal: an int, or a float that keeps a decimal point. */
export function num(n: number, float: boolean): PyValue {
  if (!float) return { t: 'num', text: String(Math.round(n)) };
  const s = String(Number(n.toFixed(6)));
  return { t: 'num', text: /[.eE]/.test(s) ? s : `${s}.0` };
}
