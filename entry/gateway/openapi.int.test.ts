// The OpenAPI document against the validation, through the real routes of real gateways (PostgreSQL
// and Temporal): for every bound the served /openapi.json declares on a request input (path and
// query parameters, request bodies, with their $refs and anyOf resolved), a request just inside
// it is not refused for that field and one just outside it is a 422 naming that field. The bounds
// are read from the document, not listed here, so a bound added later is checked too; a keyword
// this walk does not know fails the test until it is taught. Requests inside every bound name a
// campaign that does not exist (404) or, to create one, one that does (409): nothing is created.
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { registerCampaign } from '../../platform/store/campaigns.js';
import {
  type GatewayUnderTest,
  startGatewayUnderTest,
} from '../../test/support/gateway/gateway-under-test.js';
import { DEFAULT_BODY_LIMIT, DEFAULT_LIMITS } from './request-limits.js';

// biome-ignore lint/suspicious/noExplicitAny: JSON Schema objects as the document serves them
type Schema = Record<string, any>;
interface Parameter {
  name: string;
  in: 'path' | 'query' | 'header' | 'cookie';
  required?: boolean;
  schema: Schema;
}
interface Operation {
  parameters?: Parameter[];
  requestBody?: { required?: boolean; description?: string; content: Record<string, { schema: Schema }> };
}
interface Doc {
  paths: Record<string, Record<string, Operation>>;
  components: { schemas: Record<string, Schema> };
}
interface Req {
  path: Record<string, string>;
  query: Record<string, string>;
  body?: unknown;
}
type Mutation = (r: Req) => Req;
/** One request to send and the field its answer is judged by. */
interface Probe {
  what: string;
  /** The error field that must (outside) or must not (inside) be named by a 422. */
  fields: string[];
  side: 'inside' | 'outside';
  mutate: Mutation;
  /** Where the bound is documented. */
  schema: Schema;
}

const TOKEN = `tok-${randomUUID()}`;
const taskQueue = `gateway-openapi-${randomUUID().slice(0, 8)}`;
// A campaign that exists (POST /v1/campaigns inside every bound is a 409 campaign-exists, since its
// config differs) and one that does not (every campaign route inside every bound is a 404).
const EXISTING = `oa-${randomUUID().slice(0, 8)}`;
const UNKNOWN = `oa-none-${randomUUID().slice(0, 8)}`;
const EXISTING_CONFIG = { ingestion: { unknownTasks: 'accept' } };
const OMIT = Symbol('omit');
const EXTRA = 'unexpectedField';

// The schema keywords this walk understands; any other one is a bound it would miss.
const KNOWN = new Set([
  'type',
  'properties',
  'required',
  'additionalProperties',
  'items',
  'minimum',
  'maximum',
  'exclusiveMinimum',
  'exclusiveMaximum',
  'minLength',
  'maxLength',
  'pattern',
  'enum',
  'minItems',
  'maxItems',
  'nullable',
  'anyOf',
  'allOf',
  '$ref',
  'description',
  'default',
  'title',
  'example',
  'examples',
]);

const clone = <T>(v: T): T => (v === undefined ? v : structuredClone(v));
const field = (segs: readonly (string | number)[]) =>
  segs.reduce<string>((out, s) => (typeof s === 'number' ? `${out}[${s}]` : out ? `${out}.${s}` : s), '') ||
  '(body)';

function nextUp(x: number, dir: 1 | -1): number {
  if (x === 0) return dir * Number.MIN_VALUE;
  const b = new Float64Array([x]);
  const i = new BigInt64Array(b.buffer);
  i[0] = i[0]! + (x > 0 === dir > 0 ? 1n : -1n);
  return b[0]!;
}

/**
 * The shortest string a simple pattern matches: anchors, literals, escapes (\d \w \. ...), classes
 * ([A-Za-z0-9._-]) and quantifiers ({m}, {m,n}, ?, *, +). Anything else fails the test.
 */
function fromPattern(pattern: string): string {
  let out = '';
  let i = 0;
  const atom = (): string => {
    const c = pattern[i]!;
    if (c === '\\') {
      const e = pattern[i + 1]!;
      i += 2;
      return e === 'd' ? '0' : e === 'w' ? 'a' : e === 's' ? ' ' : e;
    }
    if (c === '[') {
      const end = pattern.indexOf(']', i + 2);
      const body = pattern.slice(i + 1, end);
      if (body.startsWith('^') || end < 0) throw new Error(`pattern ${pattern}: negated or open class`);
      i = end + 1;
      return body[0] === '\\' ? (body[1] === 'd' ? '0' : body[1]!) : body[0]!;
    }
    if ('()|.'.includes(c)) throw new Error(`pattern ${pattern}: ${c} is not handled; teach fromPattern`);
    i++;
    return c;
  };
  while (i < pattern.length) {
    const c = pattern[i]!;
    if ((c === '^' && i === 0) || (c === '$' && i === pattern.length - 1)) {
      i++;
      continue;
    }
    const a = atom();
    let times = 1;
    const q = pattern[i];
    if (q === '{') {
      const end = pattern.indexOf('}', i);
      times = Number(pattern.slice(i + 1, end).split(',')[0]);
      i = end + 1;
    } else if (q === '?' || q === '*') {
      times = 0;
      i++;
    } else if (q === '+') i++;
    out += a.repeat(times);
  }
  if (!new RegExp(pattern).test(out)) throw new Error(`pattern ${pattern}: generated ${out}, which fails it`);
  return out;
}

class Walker {
  readonly probes: Probe[] = [];
  constructor(
    private readonly doc: Doc,
    /** Put in generated strings where they allow it: ids of this run only. */
    private readonly tag = randomUUID().slice(0, 6),
  ) {}

  resolve(s: Schema): Schema {
    let out = s;
    while (out.$ref) {
      const name = String(out.$ref).replace('#/components/schemas/', '');
      const target = this.doc.components.schemas[name];
      if (!target) throw new Error(`unresolved ${out.$ref}`);
      const { $ref: _r, ...rest } = out;
      out = { ...target, ...rest };
    }
    if (out.allOf) {
      const { allOf, ...rest } = out;
      out = (allOf as Schema[]).reduce((acc, part) => merge(acc, this.resolve(part)), rest);
    }
    for (const k of Object.keys(out))
      if (!KNOWN.has(k)) throw new Error(`schema keyword ${k} is not checked by this test: teach it`);
    return out;
  }

  /** A value inside every bound of the schema (salt varies strings and integers of array items). */
  gen(schema: Schema, salt = 0): unknown {
    const s = this.resolve(schema);
    if (s.anyOf) {
      const { anyOf, ...rest } = s;
      return this.gen(merge(rest, this.resolve((anyOf as Schema[])[0]!)), salt);
    }
    if (s.enum) return s.enum[0];
    switch (s.type) {
      case 'object': {
        const o: Record<string, unknown> = {};
        for (const k of (s.required as string[] | undefined) ?? []) {
          if (!s.properties?.[k]) throw new Error(`required ${k} has no schema`);
          o[k] = this.gen(s.properties[k], salt);
        }
        return o;
      }
      case 'array':
        return Array.from({ length: s.minItems ?? 0 }, (_, i) => this.gen(s.items ?? {}, i));
      case 'integer':
      case 'number': {
        const lo =
          s.minimum === undefined
            ? 0
            : s.exclusiveMinimum
              ? s.type === 'integer'
                ? s.minimum + 1
                : nextUp(s.minimum, 1)
              : s.minimum;
        const v = lo + salt;
        return s.maximum !== undefined && v > s.maximum ? lo : v;
      }
      case 'string':
        return this.stringOf(s, undefined, salt) ?? fail(`no string fits ${JSON.stringify(s)}`);
      case 'boolean':
        return false;
      default:
        return {};
    }
  }

  /** A string inside the schema's pattern, of the given length (else of any length it allows). */
  stringOf(s: Schema, length?: number, salt = 0): string | undefined {
    const seed = s.pattern ? fromPattern(s.pattern) : 'x';
    const fits = (v: string) =>
      (!s.pattern || new RegExp(s.pattern).test(v)) &&
      (length === undefined
        ? v.length >= (s.minLength ?? 0) && v.length <= (s.maxLength ?? Number.MAX_SAFE_INTEGER)
        : v.length === length);
    for (const start of [`${seed}${this.tag}${salt}`, `${seed}${salt}`, seed])
      for (const fill of ['x', '0', 'a', 'A', '-']) {
        let v = start;
        const want = length ?? Math.max(v.length, s.minLength ?? 0);
        while (v.length < want) v += fill;
        v = v.slice(0, Math.min(want, s.maxLength ?? Number.MAX_SAFE_INTEGER));
        if (fits(v)) return v;
      }
    return undefined;
  }

  /**
   * The probes of one schema at one place: `set` puts a value there (OMIT removes it), `child`
   * gives the place of a property or of an array's first item (making its parents as needed).
   */
  walk(raw: Schema, at: Place): void {
    const s = this.resolve(raw);
    const probe = (side: Probe['side'], what: string, value: unknown, fields = [at.field]) =>
      this.probes.push({
        what: `${at.field}: ${what}`,
        fields,
        side,
        mutate: (r) => at.set(r, value),
        schema: s,
      });
    if (s.anyOf) {
      this.alternatives(s, at);
      const { anyOf: _a, ...rest } = s;
      this.walk(rest, at);
      return;
    }
    if (s.nullable) probe('inside', 'nullable: null', null);
    if (s.enum) {
      for (const v of s.enum) probe('inside', `enum ${JSON.stringify(v)}`, v);
      const other = s.enum.every((v: unknown) => typeof v === 'boolean')
        ? !s.enum.includes(true)
        : `${s.enum.join('')}-not-one`;
      if (!s.enum.includes(other)) probe('outside', `not in enum ${JSON.stringify(s.enum)}`, other);
    }
    const num = s.type === 'integer' || s.type === 'number';
    if (num) {
      const base = this.gen(s) as number;
      if (s.type === 'integer') {
        probe('inside', 'integer', base);
        probe('outside', 'integer: a fraction', base + 0.5);
      }
      probe('outside', `type ${s.type}: not a number`, 'abc');
      const step = (x: number, dir: 1 | -1) => (s.type === 'integer' ? x + dir : nextUp(x, dir));
      if (s.minimum !== undefined) {
        const ex = s.exclusiveMinimum === true;
        probe(
          'inside',
          `minimum ${s.minimum}${ex ? ' (exclusive)' : ''}`,
          ex ? step(s.minimum, 1) : s.minimum,
        );
        probe(
          'outside',
          `minimum ${s.minimum}${ex ? ' (exclusive)' : ''}`,
          ex ? s.minimum : step(s.minimum, -1),
        );
      }
      if (s.maximum !== undefined) {
        const ex = s.exclusiveMaximum === true;
        probe(
          'inside',
          `maximum ${s.maximum}${ex ? ' (exclusive)' : ''}`,
          ex ? step(s.maximum, -1) : s.maximum,
        );
        probe(
          'outside',
          `maximum ${s.maximum}${ex ? ' (exclusive)' : ''}`,
          ex ? s.maximum : step(s.maximum, 1),
        );
      }
    } else if (
      s.exclusiveMinimum !== undefined ||
      s.exclusiveMaximum !== undefined ||
      s.minimum !== undefined ||
      s.maximum !== undefined
    )
      throw new Error(`${at.field}: numeric bounds on a ${s.type}`);
    if (s.type === 'string') {
      if (!at.param) probe('outside', 'type string: a number', 12345);
      if (s.minLength !== undefined) {
        const inside = this.stringOf(s, s.minLength);
        if (inside === undefined) throw new Error(`${at.field}: no string of minLength ${s.minLength}`);
        if (!(at.pathParam && inside === '')) probe('inside', `minLength ${s.minLength}`, inside);
        if (s.minLength > 0 && !(at.pathParam && s.minLength === 1))
          probe('outside', `minLength ${s.minLength}`, inside.slice(0, -1));
      }
      if (s.maxLength !== undefined) {
        const inside = this.stringOf(s, s.maxLength);
        if (inside === undefined) throw new Error(`${at.field}: no string of maxLength ${s.maxLength}`);
        probe('inside', `maxLength ${s.maxLength}`, inside);
        probe('outside', `maxLength ${s.maxLength}`, `${inside}x`);
      }
      if (s.pattern) {
        const re = new RegExp(s.pattern);
        // The base value when it has one (a campaign id that exists, or none does), else a new one.
        const current = at.get();
        const inside =
          typeof current === 'string' && re.test(current)
            ? current
            : (this.stringOf(s) ?? fail(`${at.field}: nothing matches ${s.pattern}`));
        probe('inside', `pattern ${s.pattern}`, inside);
        const outside = [`!${inside.slice(1)}`, '!', `${inside}!`, ' ', ''].find(
          (v) => !re.test(v) && !(at.pathParam && v === ''),
        );
        if (outside === undefined) throw new Error(`${at.field}: every candidate matches ${s.pattern}`);
        probe('outside', `pattern ${s.pattern}`, outside);
      }
    } else if (s.minLength !== undefined || s.maxLength !== undefined || s.pattern !== undefined)
      throw new Error(`${at.field}: string bounds on a ${s.type}`);
    if (s.type === 'boolean' && !at.param) probe('outside', 'type boolean: a string', 'yes');
    if (s.type === 'array') {
      if (at.param) throw new Error(`${at.field}: array parameters are not handled`);
      probe('outside', 'type array: an object', {});
      const items = (n: number) => Array.from({ length: n }, (_, i) => this.gen(s.items ?? {}, i));
      if (s.minItems !== undefined) {
        probe('inside', `minItems ${s.minItems}`, items(s.minItems));
        if (s.minItems > 0) probe('outside', `minItems ${s.minItems}`, items(s.minItems - 1));
      }
      if (s.maxItems !== undefined) {
        probe('inside', `maxItems ${s.maxItems}`, items(s.maxItems));
        probe('outside', `maxItems ${s.maxItems}`, items(s.maxItems + 1));
      }
      if (s.items) this.walk(s.items, at.child(0, s.items));
    } else if (s.minItems !== undefined || s.maxItems !== undefined || s.items !== undefined)
      throw new Error(`${at.field}: array bounds on a ${s.type}`);
    if (s.type === 'object') {
      if (at.param) throw new Error(`${at.field}: object parameters are not handled`);
      probe('outside', 'type object: an array', []);
      for (const k of (s.required as string[] | undefined) ?? [])
        this.probes.push({
          what: `${at.field}: required ${k}`,
          fields: [at.child(k, s.properties[k]).field],
          side: 'outside',
          mutate: (r) => at.child(k, s.properties[k]).set(r, OMIT),
          schema: s,
        });
      if (s.additionalProperties === false) {
        const extra = at.child(EXTRA, {});
        this.probes.push({
          what: `${at.field}: additionalProperties false`,
          fields: [extra.field],
          side: 'outside',
          mutate: (r) => extra.set(r, 1),
          schema: s,
        });
      }
      for (const [k, sub] of Object.entries((s.properties ?? {}) as Record<string, Schema>))
        this.walk(sub, at.child(k, sub));
    }
  }

  /**
   * anyOf: a value inside each alternative is not refused for the fields they name; one outside
   * every alternative (each way to leave each of them, combined) is a 422 naming one of them.
   */
  alternatives(s: Schema, at: Place): void {
    const { anyOf, ...rest } = s;
    const branches = (anyOf as Schema[]).map((b) => this.resolve(b));
    const named = [
      ...new Set(branches.flatMap((b) => [...Object.keys(b.properties ?? {}), ...(b.required ?? [])])),
    ];
    const fields = named.map((k) => at.child(k, rest.properties?.[k] ?? {}).field);
    // Inside one alternative only: its properties as it wants them, the others' left out (or, when
    // required, as the schema without the alternatives makes them).
    branches.forEach((b, i) => {
      const mine = merge(rest, b);
      const own = new Set([...Object.keys(b.properties ?? {}), ...(b.required ?? [])]);
      this.probes.push({
        what: `${at.field}: inside anyOf[${i}] alone`,
        fields,
        side: 'inside',
        mutate: (r) =>
          named.reduce((acc, k) => {
            const place = at.child(k, rest.properties?.[k] ?? {});
            if (own.has(k)) return place.set(acc, this.gen(mine.properties[k]));
            return rest.required?.includes(k)
              ? place.set(acc, this.gen(rest.properties[k]))
              : place.set(acc, OMIT);
          }, r),
        schema: s,
      });
    });
    // The ways out of each alternative, walked on the alternative alone (its own bounds).
    // The ways out of each alternative: its own bounds, on the types its properties have.
    const ways = branches.map((b) => {
      const sub = new Walker(this.doc, this.tag);
      const own = Object.fromEntries(
        Object.entries((b.properties ?? {}) as Record<string, Schema>).map(([k, v]) => [
          k,
          { type: this.resolve(rest.properties?.[k] ?? {}).type, ...v },
        ]),
      );
      sub.walk({ type: rest.type, properties: own, ...(b.required ? { required: b.required } : {}) }, at);
      return sub.probes.filter((p) => p.side === 'outside' && !p.what.includes(': type '));
    });
    let combos: Probe[][] = [[]];
    for (const w of ways) combos = combos.flatMap((c) => w.map((p) => [...c, p]));
    for (const c of combos)
      this.probes.push({
        what: `${at.field}: outside every anyOf alternative (${c.map((p) => p.what).join(' & ')})`,
        fields,
        side: 'outside',
        mutate: (r) => c.reduce((acc, p) => p.mutate(acc), r),
        schema: s,
      });
  }
}

/** Both schemas at once (an anyOf alternative with its parent): properties merged one by one. */
function merge(a: Schema, b: Schema): Schema {
  const keys = new Set([...Object.keys(a.properties ?? {}), ...Object.keys(b.properties ?? {})]);
  const properties = Object.fromEntries(
    [...keys].map((k) => [k, { ...a.properties?.[k], ...b.properties?.[k] }]),
  );
  return {
    ...a,
    ...b,
    ...(keys.size ? { properties } : {}),
    ...(a.required || b.required
      ? { required: [...new Set([...(a.required ?? []), ...(b.required ?? [])])] }
      : {}),
  };
}

function fail(message: string): never {
  throw new Error(message);
}

interface Place {
  field: string;
  /** A path or query parameter (its values are strings; a path segment cannot be empty). */
  param?: boolean;
  pathParam?: boolean;
  set(r: Req, value: unknown): Req;
  /** The value at this place in the operation's base request (undefined when it has none). */
  get(): unknown;
  child(key: string | number, schema: Schema): Place;
}

function paramPlace(p: Parameter, base: Req): Place {
  return {
    get: () => (p.in === 'path' ? base.path : base.query)[p.name],
    field: p.name,
    param: true,
    pathParam: p.in === 'path',
    set(r, value) {
      const out = clone(r);
      const where = p.in === 'path' ? out.path : out.query;
      if (value === OMIT) delete where[p.name];
      else where[p.name] = String(value);
      return out;
    },
    child() {
      throw new Error(`${p.name}: parameters are not objects`);
    },
  };
}

/** A place in the body: its parents are made (from their schemas) when the base value lacks them. */
function bodyPlace(w: Walker, base: Req, steps: { key: string | number; schema: Schema }[]): Place {
  return {
    get: () =>
      // biome-ignore lint/suspicious/noExplicitAny: walking a JSON value
      steps.reduce<any>((v, s) => (v === undefined || v === null ? undefined : v[s.key]), base.body),
    field: field(steps.map((s) => s.key)),
    set(r, value) {
      const out = clone(r);
      if (steps.length === 0) return { ...out, body: value === OMIT ? undefined : clone(value) };
      // biome-ignore lint/suspicious/noExplicitAny: walking a JSON value
      let cur: any = out.body;
      steps.forEach((s, i) => {
        const last = i === steps.length - 1;
        if (last) {
          if (value === OMIT) delete cur[s.key];
          else cur[s.key] = clone(value);
          return;
        }
        if (cur[s.key] === undefined) cur[s.key] = w.gen(s.schema);
        cur = cur[s.key];
      });
      return out;
    },
    child(key, schema) {
      return bodyPlace(w, base, [...steps, { key, schema }]);
    },
  };
}

interface Answer {
  statusCode: number;
  body: string;
}

async function send(gw: GatewayUnderTest, method: string, template: string, r: Req): Promise<Answer> {
  const url =
    template.replace(/\{(\w+)\}/g, (_, name: string) =>
      encodeURIComponent(r.path[name] ?? fail(`no ${name}`)),
    ) + (Object.keys(r.query).length ? `?${new URLSearchParams(r.query)}` : '');
  const res = await gw.app.inject({
    method: method.toUpperCase() as 'GET',
    url,
    headers: {
      authorization: `Bearer ${TOKEN}`,
      ...(r.body === undefined ? {} : { 'content-type': 'application/json' }),
    },
    ...(r.body === undefined ? {} : { payload: JSON.stringify(r.body) }),
  });
  return { statusCode: res.statusCode, body: res.body };
}

const errorFields = (a: Answer): string[] => {
  if (a.statusCode !== 422) return [];
  const p = JSON.parse(a.body) as { errors?: { field: string }[] };
  return (p.errors ?? []).map((e) => e.field);
};
const brief = (a: Answer) => `${a.statusCode} ${a.body.slice(0, 400)}`;

/** The base request of an operation: inside every bound, naming no existing campaign (or one, to create). */
function baseRequest(w: Walker, op: Operation): Req {
  const r: Req = { path: {}, query: {} };
  for (const p of op.parameters ?? []) {
    if (p.in !== 'path' && p.in !== 'query') continue;
    if (p.in === 'path' || p.required) (p.in === 'path' ? r.path : r.query)[p.name] = String(w.gen(p.schema));
  }
  if (r.path.id !== undefined) r.path.id = UNKNOWN;
  const schema = op.requestBody?.content['application/json']?.schema;
  if (schema) {
    r.body = w.gen(schema);
    const b = r.body as Record<string, unknown>;
    if (typeof b.campaignId === 'string') b.campaignId = EXISTING;
  }
  return r;
}

/**
 * Relations between fields that OpenAPI 3.0 cannot state, so the document says them in the field's
 * description: a value inside the field's own bounds may be refused for them (the generated
 * request holds its other fields at their smallest). Each is accepted only when the refusal says
 * it and the description documents it.
 */
const DOCUMENTED_RELATIONS: { field: RegExp; message: RegExp; description: RegExp }[] = [
  {
    field: /^retrainedSteps\[\d+\]\.step$/,
    message: /at most the checkpoint's step/,
    description: /at most the checkpoint's step/,
  },
];

function isDocumentedRelation(a: Answer, probe: Probe): boolean {
  const errors = (JSON.parse(a.body) as { errors?: { field: string; message: string }[] }).errors ?? [];
  return errors
    .filter((e) => probe.fields.includes(e.field))
    .every((e) =>
      DOCUMENTED_RELATIONS.some(
        (r) =>
          r.field.test(e.field) &&
          r.message.test(e.message) &&
          r.description.test(String(probe.schema.description)),
      ),
    );
}

interface Outcome {
  what: string;
  problem: string;
}

async function checkGateway(
  gw: GatewayUnderTest,
): Promise<{ probes: number; unreachable: number; problems: Outcome[] }> {
  const doc = JSON.parse((await gw.app.inject({ url: '/openapi.json' })).body) as Doc;
  const bodyLimit = gw.app.initialConfig.bodyLimit!;
  const problems: Outcome[] = [];
  let probes = 0;
  let unreachable = 0;
  for (const [template, ops] of Object.entries(doc.paths))
    for (const [method, op] of Object.entries(ops)) {
      const w = new Walker(doc);
      const base = baseRequest(w, op);
      const name = `${method.toUpperCase()} ${template}`;
      if (!op.parameters?.length && !op.requestBody) continue;
      // Inside every bound, about a campaign that does not exist (or, to create, one that does).
      const sane = await send(gw, method, template, base);
      if (![404, 409].includes(sane.statusCode))
        problems.push({
          what: `${name} base ${JSON.stringify(base).slice(0, 200)}`,
          problem: `answered ${brief(sane)}`,
        });
      for (const p of op.parameters ?? []) {
        if (p.in === 'header' || p.in === 'cookie') {
          // Header parameters are not validated as documented bounds; none may declare one.
          const { type: _t, ...bounds } = w.resolve(p.schema);
          if (Object.keys(bounds).some((k) => !['description', 'default'].includes(k)))
            problems.push({
              what: `${name} header ${p.name}`,
              problem: 'declares bounds this test does not check',
            });
          continue;
        }
        const at = paramPlace(p, base);
        if (p.required && p.in === 'query')
          w.probes.push({
            what: `${p.name}: required`,
            fields: [p.name],
            side: 'outside',
            mutate: (r) => at.set(r, OMIT),
            schema: p.schema,
          });
        w.walk(p.schema, at);
      }
      const body = op.requestBody?.content['application/json']?.schema;
      if (body) {
        const root = bodyPlace(w, base, []);
        if (op.requestBody?.required)
          w.probes.push({
            what: '(body): required',
            fields: ['(body)'],
            side: 'outside',
            mutate: (r) => root.set(r, OMIT),
            schema: body,
          });
        w.walk(body, root);
      }
      for (const probe of w.probes) {
        probes++;
        const req = probe.mutate(base);
        const size = req.body === undefined ? 0 : Buffer.byteLength(JSON.stringify(req.body));
        const a = await send(gw, method, template, req);
        const what = `${name} ${probe.side} ${probe.what}`;
        const named = errorFields(a).filter((f) => probe.fields.includes(f));
        if (size > bodyLimit) {
          // The bound cannot be reached under the body limit: fine when the document says the
          // limit (this gateway's) applies first, on the request body or on the bound's schema.
          unreachable++;
          const said = [op.requestBody?.description, probe.schema.description].some(
            (d) => d?.includes(`at most ${bodyLimit} bytes`) && d.includes('before any bound'),
          );
          if (a.statusCode !== 413 || !said)
            problems.push({
              what,
              problem: `a ${size}-byte body over the limit of ${bodyLimit} the document does not state: ${brief(a)}`,
            });
          continue;
        }
        if (
          probe.side === 'inside' &&
          ((named.length > 0 && !isDocumentedRelation(a, probe)) || ![404, 409, 422].includes(a.statusCode))
        )
          problems.push({ what, problem: `refused inside the bound: ${brief(a)}` });
        if (probe.side === 'outside' && named.length === 0)
          problems.push({ what, problem: `not a 422 naming ${probe.fields.join(' or ')}: ${brief(a)}` });
      }
    }
  return { probes, unreachable, problems };
}

const gateways: GatewayUnderTest[] = [];

beforeAll(async () => {
  for (const [application, limits, bodyLimit] of [
    ['rods-gateway-openapi-default', undefined, undefined],
    ['rods-gateway-openapi-small', { maxBatchN: 50 }, 1024 * 1024],
  ] as const)
    gateways.push(
      await startGatewayUnderTest({
        application,
        tokens: [TOKEN],
        taskQueue,
        ...(limits ? { limits } : {}),
        ...(bodyLimit ? { bodyLimit } : {}),
      }),
    );
  await registerCampaign(gateways[0]!.db, { campaignId: EXISTING, config: EXISTING_CONFIG });
});

afterAll(async () => {
  for (const g of gateways) await g.close([EXISTING, UNKNOWN]);
});

describe('the served OpenAPI document', () => {
  it.each([
    ['a gateway with the default limits', 0, DEFAULT_LIMITS.maxBatchN, DEFAULT_BODY_LIMIT],
    ['a gateway with its own batch cap and a 1 MiB body limit', 1, 50, 1024 * 1024],
  ])('on %s, every documented bound is the one the routes enforce', async (_what, i, maxN, bodyLimit) => {
    const gw = gateways[i]!;
    const { probes, unreachable, problems } = await checkGateway(gw);
    expect(problems).toEqual([]);
    expect(probes).toBeGreaterThan(60);
    // Under the default limit every bound is reached; under 1 MiB the largest arrays are not
    // (and the document says the limit applies first).
    if (bodyLimit === DEFAULT_BODY_LIMIT) expect(unreachable).toBe(0);
    else expect(unreachable).toBeGreaterThan(0);
    // The walk read this gateway's cap, not another gateway's (the document is not shared).
    const doc = JSON.parse((await gw.app.inject({ url: '/openapi.json' })).body) as Doc;
    const n = doc.paths['/v1/campaigns/{id}/batch']!.get!.parameters!.find((p) => p.name === 'n')!;
    expect(n.schema.maximum).toBe(maxN);
    expect(gw.app.initialConfig.bodyLimit).toBe(bodyLimit);
  });
});
