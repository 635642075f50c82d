// A restricted parser for BFCL ground-truth call strings such as
// `mv(source='a.txt', destination='b')`, in pure TypeScript for the deterministic gates (it runs
// in workflow code). Generated text is data (docs/architecture.md §4, invariant 6): this module only tokenizes
// and parses; nothing is evaluated. It accepts the subset of Python that the executor's
// restricted parser (executor/parser.py) accepts, or less:
//
//   call    := NAME '(' [arg (',' arg)* [',']] ')'      one call of a bare function name
//   arg     := NAME '=' literal | literal                positional arguments before keywords
//   literal := string+ | number | sign number | True | False | None
//            | '[' items ']' | '(' items ')' | '(' literal ')' | '{' [key ':' literal, ...] '}'
//
// Strings: '...', "...", '''...''', """...""", with the prefixes r/u (any case); adjacent strings
// concatenate; escapes as in Python (\N{...} is refused). Bytes and f-strings are refused.
// Numbers: Python int (decimal, 0x, 0o, 0b, underscores) and float literals; complex refused.
// Dict keys: string or number (or bool) literals. Refused, with a reason: names as values,
// attribute calls, calls inside arguments, subscripts, operators, comprehensions, lambdas,
// sets, *args/**kwargs, keywords or underscore names as function or argument names, repeated
// keyword arguments, anything after the call, nesting deeper than MAX_NESTING brackets, and
// input longer than MAX_CALL_CHARS. Function names and argument names are ASCII identifiers.
// Reasons quote at most a short, escaped snippet of the input.

export const MAX_CALL_CHARS = 20_000;
export const MAX_NESTING = 20;

export type Literal =
  | { type: 'str'; value: string }
  | { type: 'num'; value: number; text: string }
  | { type: 'bool'; value: boolean }
  | { type: 'none' }
  | { type: 'list'; items: Literal[] }
  | { type: 'tuple'; items: Literal[] }
  | { type: 'dict'; entries: [Literal, Literal][] };

export interface ParsedCall {
  name: string;
  args: Literal[];
  kwargs: { name: string; value: Literal }[];
}

export type ParseResult = { ok: true; call: ParsedCall } | { ok: false; reason: string };

const PY_KEYWORDS = new Set(
  (
    'False None True and as assert async await break class continue def del elif else except finally ' +
    'for from global if import in is lambda nonlocal not or pass raise return try while with yield'
  ).split(' '),
);

/** A short, escaped excerpt of untrusted text for a reason message. */
export function snippet(text: string, max = 40): string {
  const cut = text.length > max ? `${text.slice(0, max)}…` : text;
  return JSON.stringify(cut);
}

class Reject extends Error {}

const IDENT_START = /[A-Za-z_]/;
const IDENT_PART = /[A-Za-z0-9_]/;

const NUMBER =
  /^(?:(?:[0-9](?:_?[0-9])*)?\.[0-9](?:_?[0-9])*(?:[eE][+-]?[0-9](?:_?[0-9])*)?|[0-9](?:_?[0-9])*\.(?:[eE][+-]?[0-9](?:_?[0-9])*)?|[0-9](?:_?[0-9])*[eE][+-]?[0-9](?:_?[0-9])*|0[xX](?:_?[0-9a-fA-F])+|0[oO](?:_?[0-7])+|0[bB](?:_?[01])+|[0-9](?:_?[0-9])*)/;

class Parser {
  pos = 0;
  nesting = 0;
  constructor(readonly src: string) {}

  fail(msg: string, at = this.pos): never {
    throw new Reject(`${msg} (column ${at + 1})`);
  }

  peek(off = 0): string {
    return this.src[this.pos + off] ?? '';
  }

  eof(): boolean {
    return this.pos >= this.src.length;
  }

  /** Spaces, tabs, form feeds, comments and backslash continuations; newlines only inside brackets. */
  ws(): void {
    for (;;) {
      const c = this.peek();
      if (c === ' ' || c === '\t' || c === '\f') this.pos++;
      else if ((c === '\n' || c === '\r') && this.nesting > 0) this.pos++;
      else if (c === '\\' && (this.peek(1) === '\n' || this.peek(1) === '\r')) {
        this.pos += this.peek(1) === '\r' && this.peek(2) === '\n' ? 3 : 2;
      } else if (c === '#') {
        while (!this.eof() && this.peek() !== '\n' && this.peek() !== '\r') this.pos++;
      } else return;
    }
  }

  ident(): string {
    const start = this.pos;
    if (!IDENT_START.test(this.peek())) return '';
    while (IDENT_PART.test(this.peek())) this.pos++;
    return this.src.slice(start, this.pos);
  }

  call(): ParsedCall {
    this.ws();
    const at = this.pos;
    const c = this.peek();
    if (c === '') this.fail('empty call string');
    if (!IDENT_START.test(c)) {
      if (c.charCodeAt(0) > 0x7f) this.fail('the function name must be an ASCII identifier');
      this.fail(`expected a function name, found ${snippet(this.src.slice(at, at + 10))}`);
    }
    const name = this.ident();
    if (PY_KEYWORDS.has(name)) this.fail(`${snippet(name)} is a Python keyword, not a function name`, at);
    if (name.startsWith('_')) {
      this.fail(
        `function name ${snippet(name)} starts with an underscore: private and dunder names are not callable`,
        at,
      );
    }
    this.ws();
    if (this.peek() === '.')
      this.fail('method calls on objects (a.b(...)) are not allowed; call the function by its bare name');
    if (this.peek() !== '(')
      this.fail(`expected a single function call: ${snippet(name)} is not followed by (`);
    this.pos++;
    this.nesting++;
    const args: Literal[] = [];
    const kwargs: { name: string; value: Literal }[] = [];
    const seen = new Set<string>();
    for (;;) {
      this.ws();
      if (this.peek() === ')') break;
      if (this.peek() === '*') this.fail(`${name}: *args and **kwargs unpacking are not allowed`);
      const kw = this.keywordName();
      if (kw !== null) {
        if (PY_KEYWORDS.has(kw.name))
          this.fail(`${name}: ${snippet(kw.name)} is a Python keyword, not an argument name`, kw.at);
        if (kw.name.startsWith('_'))
          this.fail(`${name}: argument name ${snippet(kw.name)} starts with an underscore`, kw.at);
        if (seen.has(kw.name)) this.fail(`${name}: argument ${snippet(kw.name)} given twice`, kw.at);
        seen.add(kw.name);
        this.ws();
        kwargs.push({ name: kw.name, value: this.literal(`${name}: argument ${kw.name}`) });
      } else {
        if (kwargs.length > 0) this.fail(`${name}: a positional argument follows a keyword argument`);
        args.push(this.literal(`${name}: positional argument ${args.length}`));
      }
      this.ws();
      if (this.peek() === ',') {
        this.pos++;
        continue;
      }
      if (this.peek() === ')') break;
      if (this.eof()) this.fail(`${name}: missing )`);
      this.fail(
        `${name}: expected , or ) after an argument, found ${snippet(this.src.slice(this.pos, this.pos + 10))}`,
      );
    }
    this.pos++; // ')'
    this.nesting--;
    this.ws();
    while (this.peek() === '\n' || this.peek() === '\r') {
      this.pos++;
      this.ws();
    }
    if (!this.eof()) {
      const rest = this.src.slice(this.pos, this.pos + 10);
      if (this.peek() === '(') this.fail('calling the result of a call is not allowed');
      if (this.peek() === '.' || this.peek() === '[')
        this.fail('only a single call is allowed: no attribute or subscript of its result');
      this.fail(`only a single function call is allowed; unexpected ${snippet(rest)} after it`);
    }
    return { name, args, kwargs };
  }

  /** `NAME =` (not `==`) at the current position: consumes it and returns the name; else null. */
  keywordName(): { name: string; at: number } | null {
    const save = this.pos;
    const name = this.ident();
    if (name) {
      this.ws();
      if (this.peek() === '=' && this.peek(1) !== '=') {
        this.pos++;
        return { name, at: save };
      }
    }
    this.pos = save;
    return null;
  }

  enter(where: string): void {
    this.nesting++;
    if (this.nesting > MAX_NESTING + 1)
      this.fail(`${where}: literal nested deeper than ${MAX_NESTING} levels`);
  }

  literal(where: string): Literal {
    this.ws();
    const c = this.peek();
    const at = this.pos;
    if (c === '') this.fail(`${where}: missing value`);
    if (c === '[') return this.sequence(where, ']', 'list');
    if (c === '(') return this.paren(where);
    if (c === '{') return this.dict(where);
    if (c === '+' || c === '-') {
      this.pos++;
      this.ws();
      const d = this.peek();
      if (!(/[0-9]/.test(d) || (d === '.' && /[0-9]/.test(this.peek(1))))) {
        this.fail(`${where}: a sign is allowed only in front of a number`, at);
      }
      const n = this.number(where);
      return c === '-' ? { type: 'num', value: -n.value, text: `-${n.text}` } : { ...n, text: `+${n.text}` };
    }
    if (/[0-9]/.test(c) || (c === '.' && /[0-9]/.test(this.peek(1)))) return this.number(where);
    if (c === '"' || c === "'") return this.strings(where);
    if (IDENT_START.test(c)) {
      const word = this.ident();
      if ((this.peek() === '"' || this.peek() === "'") && /^[rRuUbBfF]{1,2}$/.test(word)) {
        this.pos = at;
        return this.strings(where);
      }
      if (word === 'True' || word === 'False')
        return this.after({ type: 'bool', value: word === 'True' }, where);
      if (word === 'None') return this.after({ type: 'none' }, where);
      if (word === 'lambda') this.fail(`${where}: a lambda is not allowed; arguments must be literals`, at);
      this.ws();
      if (this.peek() === '(') this.fail(`${where}: a call is not allowed; arguments must be literals`, at);
      if (this.peek() === '.')
        this.fail(`${where}: an attribute access is not allowed; arguments must be literals`, at);
      this.fail(`${where}: the name ${snippet(word)} is not allowed; arguments must be literals`, at);
    }
    this.fail(`${where}: ${snippet(c)} does not start a literal`);
  }

  /** After a complete literal: refuse operators, subscripts, attribute access and calls on it. */
  after<T extends Literal>(lit: T, where: string): T {
    this.ws();
    const c = this.peek();
    if (c === '(') this.fail(`${where}: a call is not allowed; arguments must be literals`);
    if (c === '[') this.fail(`${where}: a subscript is not allowed; arguments must be literals`);
    if (c === '.') this.fail(`${where}: an attribute access is not allowed; arguments must be literals`);
    if (c !== '' && '+-*/%@&|^<>=!~'.includes(c)) {
      this.fail(`${where}: an operator expression is not allowed; arguments must be literals`);
    }
    if (c !== '' && IDENT_START.test(c)) {
      this.fail(
        `${where}: ${snippet(this.src.slice(this.pos, this.pos + 10))} is not allowed after a literal (comprehensions, conditionals and operators are refused)`,
      );
    }
    return lit;
  }

  number(where: string): { type: 'num'; value: number; text: string } {
    const at = this.pos;
    const m = NUMBER.exec(this.src.slice(this.pos, this.pos + 400));
    if (!m) this.fail(`${where}: malformed number`);
    const text = m[0];
    this.pos += text.length;
    const next = this.peek();
    if (next === 'j' || next === 'J') this.fail(`${where}: complex literals are not allowed`, at);
    if (IDENT_PART.test(next) || next === '.')
      this.fail(`${where}: malformed number ${snippet(this.src.slice(at, this.pos + 1))}`, at);
    if (/^0[0-9_]*[1-9]/.test(text) && /^[0-9_]+$/.test(text)) {
      this.fail(`${where}: leading zeros in a decimal integer are not allowed (${snippet(text)})`, at);
    }
    const value = Number(text.replace(/_/g, ''));
    if (!Number.isFinite(value)) this.fail(`${where}: the number ${snippet(text)} is not finite`, at);
    return this.after({ type: 'num', value, text }, where);
  }

  strings(where: string): Literal {
    let value = '';
    for (;;) {
      value += this.string(where);
      this.ws();
      const c = this.peek();
      if (c === '"' || c === "'") continue;
      const save = this.pos;
      const word = this.ident();
      if (word && /^[rRuUbBfF]{1,2}$/.test(word) && (this.peek() === '"' || this.peek() === "'")) {
        this.pos = save;
        continue;
      }
      this.pos = save;
      return this.after({ type: 'str', value }, where);
    }
  }

  /** One string literal (with its prefix) at the current position; returns its value. */
  string(where: string): string {
    const at = this.pos;
    const prefix = this.ident().toLowerCase();
    if (prefix.includes('b')) this.fail(`${where}: bytes literals are not allowed`, at);
    if (prefix.includes('f')) this.fail(`${where}: f-strings are not allowed`, at);
    if (!['', 'r', 'u'].includes(prefix)) this.fail(`${where}: unknown string prefix ${snippet(prefix)}`, at);
    const raw = prefix === 'r';
    const q = this.peek();
    const triple = this.peek(1) === q && this.peek(2) === q;
    this.pos += triple ? 3 : 1;
    let out = '';
    for (;;) {
      if (this.eof()) this.fail(`${where}: unterminated string`, at);
      const c = this.peek();
      if (c === q && (!triple || (this.peek(1) === q && this.peek(2) === q))) {
        this.pos += triple ? 3 : 1;
        return out;
      }
      if ((c === '\n' || c === '\r') && !triple)
        this.fail(`${where}: unterminated string (line break inside)`, at);
      if (c === '\\') {
        const e = this.peek(1);
        if (e === '') this.fail(`${where}: unterminated string`, at);
        if (raw) {
          out += c + e;
          this.pos += 2;
          continue;
        }
        this.pos += 2;
        out += this.escape(e, where);
        continue;
      }
      out += c;
      this.pos++;
    }
  }

  escape(e: string, where: string): string {
    const simple: Record<string, string> = {
      '\\': '\\',
      "'": "'",
      '"': '"',
      a: '\x07',
      b: '\b',
      f: '\f',
      n: '\n',
      r: '\r',
      t: '\t',
      v: '\v',
    };
    if (Object.hasOwn(simple, e)) return simple[e]!;
    if (e === '\n') return '';
    if (e === '\r') {
      if (this.peek() === '\n') this.pos++;
      return '';
    }
    if (/[0-7]/.test(e)) {
      let digits = e;
      while (digits.length < 3 && /[0-7]/.test(this.peek())) digits += this.src[this.pos++];
      return String.fromCodePoint(Number.parseInt(digits, 8));
    }
    const hexLen = e === 'x' ? 2 : e === 'u' ? 4 : e === 'U' ? 8 : 0;
    if (hexLen > 0) {
      const hex = this.src.slice(this.pos, this.pos + hexLen);
      if (hex.length !== hexLen || !/^[0-9a-fA-F]+$/.test(hex)) {
        this.fail(`${where}: truncated \\${e} escape`, this.pos - 2);
      }
      const cp = Number.parseInt(hex, 16);
      if (cp > 0x10ffff) this.fail(`${where}: \\${e}${hex} is not a Unicode code point`, this.pos - 2);
      this.pos += hexLen;
      return String.fromCodePoint(cp);
    }
    if (e === 'N')
      this.fail(`${where}: \\N{...} escapes are not supported; write the character itself`, this.pos - 2);
    return `\\${e}`; // Python keeps unknown escapes as they are
  }

  sequence(where: string, close: string, type: 'list' | 'tuple', first?: Literal): Literal {
    // the opening bracket is at pos (list) or was consumed by paren() (tuple, with its first item)
    const items: Literal[] = first ? [first] : [];
    if (!first) {
      this.enter(where);
      this.pos++;
    }
    for (;;) {
      this.ws();
      if (this.peek() === close) break;
      items.push(this.literal(`${where}[${items.length}]`));
      this.ws();
      if (this.peek() === ',') {
        this.pos++;
        continue;
      }
      if (this.peek() === close) break;
      if (this.eof()) this.fail(`${where}: missing ${close}`);
      if (this.peek() === 'f' && this.src.startsWith('for', this.pos)) {
        this.fail(`${where}: a comprehension is not allowed; arguments must be literals`);
      }
      this.fail(
        `${where}: expected , or ${close}, found ${snippet(this.src.slice(this.pos, this.pos + 10))}`,
      );
    }
    this.pos++;
    this.nesting--;
    return this.after({ type, items }, where);
  }

  paren(where: string): Literal {
    this.enter(where);
    this.pos++;
    this.ws();
    if (this.peek() === ')') {
      this.pos++;
      this.nesting--;
      return this.after({ type: 'tuple', items: [] }, where);
    }
    const first = this.literal(`${where}[0]`);
    this.ws();
    if (this.peek() === ',') {
      this.pos++;
      return this.sequence(where, ')', 'tuple', first);
    }
    if (this.peek() !== ')') {
      if (this.eof()) this.fail(`${where}: missing )`);
      this.fail(`${where}: expected , or ), found ${snippet(this.src.slice(this.pos, this.pos + 10))}`);
    }
    this.pos++;
    this.nesting--;
    return this.after(first, where); // a parenthesized literal is the literal itself
  }

  dict(where: string): Literal {
    this.enter(where);
    this.pos++;
    const entries: [Literal, Literal][] = [];
    for (;;) {
      this.ws();
      if (this.peek() === '}') break;
      if (this.peek() === '*') this.fail(`${where}: ** unpacking inside a dict is not allowed`);
      const keyAt = this.pos;
      const key = this.literal(`${where} key`);
      const okKey =
        key.type === 'str' || key.type === 'bool' || (key.type === 'num' && !/^[+-]/.test(key.text));
      this.ws();
      if (this.peek() === ',' || (this.peek() === '}' && entries.length === 0)) {
        this.fail(`${where}: a set is not allowed (not representable in JSON)`, keyAt);
      }
      if (!okKey) this.fail(`${where}: dict keys must be string or number literals`, keyAt);
      if (this.peek() !== ':') this.fail(`${where}: expected : after a dict key`);
      this.pos++;
      const keyText =
        key.type === 'str'
          ? key.value
          : key.type === 'num'
            ? key.text
            : String(key.type === 'bool' ? key.value : '');
      entries.push([key, this.literal(`${where}[${snippet(keyText, 20)}]`)]);
      this.ws();
      if (this.peek() === ',') {
        this.pos++;
        continue;
      }
      if (this.peek() === '}') break;
      if (this.eof()) this.fail(`${where}: missing }`);
      this.fail(`${where}: expected , or }, found ${snippet(this.src.slice(this.pos, this.pos + 10))}`);
    }
    this.pos++;
    this.nesting--;
    return this.after({ type: 'dict', entries }, where);
  }
}

/** Parses one call string; never evaluates it. */
export function parseCall(source: unknown): ParseResult {
  if (typeof source !== 'string')
    return { ok: false, reason: `a call must be a string, got ${typeof source}` };
  if (source.length > MAX_CALL_CHARS) {
    return {
      ok: false,
      reason: `call string of ${source.length} characters exceeds the limit of ${MAX_CALL_CHARS}`,
    };
  }
  const text = source.trim();
  try {
    return { ok: true, call: new Parser(text).call() };
  } catch (e) {
    if (e instanceof Reject) return { ok: false, reason: e.message };
    throw e;
  }
}

/** Length of a string in Unicode code points (Python's len). */
export function codePointLength(s: string): number {
  let n = 0;
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    if (c >= 0xd800 && c <= 0xdbff && i + 1 < s.length) {
      const d = s.charCodeAt(i + 1);
      if (d >= 0xdc00 && d <= 0xdfff) i++;
    }
    n++;
  }
  return n;
}

/**
 * The JSON value of a literal, as Python's json.dumps(ast.literal_eval(...)) would give it:
 * tuples become arrays, dict keys become strings (objects have no prototype, so any key is an
 * own property).
 */
export function literalToJson(l: Literal): unknown {
  switch (l.type) {
    case 'str':
    case 'num':
    case 'bool':
      return l.value;
    case 'none':
      return null;
    case 'list':
    case 'tuple':
      return l.items.map(literalToJson);
    case 'dict': {
      const o: Record<string, unknown> = Object.create(null);
      for (const [k, v] of l.entries) {
        const key =
          k.type === 'str'
            ? k.value
            : k.type === 'bool'
              ? k.value
                ? 'true'
                : 'false'
              : String(k.type === 'num' ? k.value : '');
        o[key] = literalToJson(v);
      }
      return o;
    }
  }
}
