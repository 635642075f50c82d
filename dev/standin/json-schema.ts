// The subset of JSON Schema that response_format schemas use (what zod's toJSONSchema emits):
// a checker, so the stand-in only answers content that matches the schema it was asked for, and
// a minimal instance for a schema it has no stage answer for.

type Schema = Record<string, unknown>;

function resolve(schema: Schema, root: Schema): Schema {
  const ref = schema.$ref;
  if (typeof ref !== 'string') return schema;
  const m = /^#\/(\$defs|definitions)\/(.+)$/.exec(ref);
  const target = m ? ((root[m[1]!] as Record<string, Schema> | undefined)?.[m[2]!] ?? {}) : {};
  return resolve(target, root);
}

function typeOf(v: unknown): string {
  if (v === null) return 'null';
  if (Array.isArray(v)) return 'array';
  if (typeof v === 'number') return Number.isInteger(v) ? 'integer' : 'number';
  return typeof v;
}

/** Problems of `value` against `schema` (empty: it matches). */
export function checkSchema(value: unknown, schema: Schema, root: Schema = schema, at = '$'): string[] {
  const s = resolve(schema, root);
  const out: string[] = [];
  const types =
    s.type === undefined ? undefined : Array.isArray(s.type) ? (s.type as string[]) : [s.type as string];
  if (types) {
    const t = typeOf(value);
    if (!types.includes(t) && !(t === 'integer' && types.includes('number')))
      return [`${at}: expected ${types.join('|')}, got ${t}`];
  }
  if (s.const !== undefined && JSON.stringify(s.const) !== JSON.stringify(value))
    out.push(`${at}: expected ${JSON.stringify(s.const)}`);
  if (Array.isArray(s.enum) && !s.enum.some((e) => JSON.stringify(e) === JSON.stringify(value))) {
    out.push(`${at}: not one of ${JSON.stringify(s.enum)}`);
  }
  if (typeof value === 'string') {
    if (typeof s.minLength === 'number' && [...value].length < s.minLength)
      out.push(`${at}: shorter than ${s.minLength}`);
    if (typeof s.maxLength === 'number' && [...value].length > s.maxLength)
      out.push(`${at}: longer than ${s.maxLength}`);
    if (typeof s.pattern === 'string' && !new RegExp(s.pattern, 'u').test(value))
      out.push(`${at}: does not match ${s.pattern}`);
  }
  if (typeof value === 'number') {
    if (typeof s.minimum === 'number' && value < s.minimum) out.push(`${at}: below ${s.minimum}`);
    if (typeof s.maximum === 'number' && value > s.maximum) out.push(`${at}: above ${s.maximum}`);
    if (typeof s.exclusiveMinimum === 'number' && value <= s.exclusiveMinimum)
      out.push(`${at}: not above ${s.exclusiveMinimum}`);
    if (typeof s.exclusiveMaximum === 'number' && value >= s.exclusiveMaximum)
      out.push(`${at}: not below ${s.exclusiveMaximum}`);
  }
  if (Array.isArray(value)) {
    if (typeof s.minItems === 'number' && value.length < s.minItems)
      out.push(`${at}: fewer than ${s.minItems} items`);
    if (typeof s.maxItems === 'number' && value.length > s.maxItems)
      out.push(`${at}: more than ${s.maxItems} items`);
    if (s.items && typeof s.items === 'object') {
      for (const [i, v] of value.entries())
        out.push(...checkSchema(v, s.items as Schema, root, `${at}[${i}]`));
    }
  }
  if (value !== null && typeof value === 'object' && !Array.isArray(value)) {
    const obj = value as Record<string, unknown>;
    const props = (s.properties ?? {}) as Record<string, Schema>;
    for (const r of (s.required as string[] | undefined) ?? [])
      if (!(r in obj)) out.push(`${at}.${r}: required`);
    for (const [k, v] of Object.entries(obj)) {
      if (props[k]) out.push(...checkSchema(v, props[k], root, `${at}.${k}`));
      else if (s.additionalProperties === false) out.push(`${at}.${k}: not allowed`);
      else if (s.additionalProperties && typeof s.additionalProperties === 'object') {
        out.push(...checkSchema(v, s.additionalProperties as Schema, root, `${at}.${k}`));
      }
    }
  }
  for (const sub of (s.allOf as Schema[] | undefined) ?? []) out.push(...checkSchema(value, sub, root, at));
  for (const key of ['anyOf', 'oneOf'] as const) {
    const subs = s[key] as Schema[] | undefined;
    if (subs && !subs.some((sub) => checkSchema(value, sub, root, at).length === 0))
      out.push(`${at}: matches none of ${key}`);
  }
  return out;
}

/** A small value that matches the schema (required properties only, minimum sizes). */
export function instanceOf(schema: Schema, root: Schema = schema): unknown {
  const s = resolve(schema, root);
  if (s.const !== undefined) return s.const;
  if (Array.isArray(s.enum) && s.enum.length) return s.enum[0];
  for (const key of ['anyOf', 'oneOf', 'allOf'] as const) {
    const subs = s[key] as Schema[] | undefined;
    if (subs?.length) return instanceOf(subs[0]!, root);
  }
  const type = Array.isArray(s.type) ? (s.type as string[])[0] : (s.type as string | undefined);
  switch (type) {
    case 'string':
      return 'x'.repeat(Math.max(1, (s.minLength as number | undefined) ?? 1));
    case 'integer':
    case 'number':
      return typeof s.minimum === 'number'
        ? s.minimum
        : typeof s.exclusiveMinimum === 'number'
          ? s.exclusiveMinimum + 1
          : 0;
    case 'boolean':
      return false;
    case 'null':
      return null;
    case 'array':
      return Array.from({ length: (s.minItems as number | undefined) ?? 0 }, () =>
        instanceOf((s.items as Schema | undefined) ?? {}, root),
      );
    default: {
      const props = (s.properties ?? {}) as Record<string, Schema>;
      const req = (s.required as string[] | undefined) ?? [];
      return Object.fromEntries(req.map((k) => [k, instanceOf(props[k] ?? {}, root)]));
    }
  }
}
