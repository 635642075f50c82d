// Parsing Canonical Form (Avro specification, "Transforming into Parsing Canonical Form"): the
// schema text that two parties must agree on to read each other's data, and what the schema
// fingerprint is computed from. Written here over the schema JSON rather than taken from avsc's
// attribute-less export, because avsc refuses some schemas the spec canonicalizes (the empty
// union, invalid field defaults) — canonical.unit.test.ts runs every case of Avro's own
// share/test/data/schema-tests.txt. The rules:
//   [PRIMITIVES] {"type":"int"} -> "int" (also when it carries a logicalType or other attributes)
//   [FULLNAMES]  names become full names; "namespace" disappears
//   [STRIP]      keep only type, name, fields, symbols, items, values, size (doc, aliases, default,
//                order, logicalType and custom attributes such as "rods.version" go)
//   [ORDER]      name, type, fields, symbols, items, values, size
//   [STRINGS], [INTEGERS], [WHITESPACE] come from JSON.stringify of the parsed values.
import avsc from 'avsc';
import { crc64Avro } from './crc64avro.js';

const PRIMITIVES = new Set(['null', 'boolean', 'int', 'long', 'float', 'double', 'bytes', 'string']);
const NAMED = new Set(['record', 'error', 'enum', 'fixed']);

/** Parses a schema the way the codec does everywhere: plain avsc types, no logical type classes. */
export function parseSchema(schema: unknown): avsc.Type {
  return avsc.Type.forSchema(schema as avsc.Schema);
}

function fullName(name: string, namespace: string | undefined): string {
  return name.includes('.') || !namespace ? name : `${namespace}.${name}`;
}

function namespaceOf(full: string): string | undefined {
  const i = full.lastIndexOf('.');
  return i < 0 ? undefined : full.slice(0, i);
}

function canonical(schema: unknown, namespace: string | undefined): string {
  if (typeof schema === 'string') {
    return JSON.stringify(PRIMITIVES.has(schema) ? schema : fullName(schema, namespace));
  }
  if (Array.isArray(schema)) {
    return `[${schema.map((s) => canonical(s, namespace)).join(',')}]`;
  }
  if (schema === null || typeof schema !== 'object') {
    throw new Error(`not an Avro schema: ${JSON.stringify(schema)}`);
  }
  const s = schema as Record<string, unknown>;
  const type = s.type;
  if (typeof type !== 'string') return canonical(type, namespace);
  if (PRIMITIVES.has(type)) return JSON.stringify(type);
  if (type === 'array') return `{"type":"array","items":${canonical(s.items, namespace)}}`;
  if (type === 'map') return `{"type":"map","values":${canonical(s.values, namespace)}}`;
  if (!NAMED.has(type)) return JSON.stringify(fullName(type, namespace));
  if (typeof s.name !== 'string') throw new Error(`a ${type} needs a name: ${JSON.stringify(schema)}`);
  const ns = typeof s.namespace === 'string' ? s.namespace || undefined : namespace;
  const name = fullName(s.name, ns);
  const head = `{"name":${JSON.stringify(name)},"type":${JSON.stringify(type)}`;
  if (type === 'enum') return `${head},"symbols":${JSON.stringify(s.symbols)}}`;
  if (type === 'fixed') return `${head},"size":${JSON.stringify(s.size)}}`;
  const inner = namespaceOf(name);
  const fields = (s.fields as Record<string, unknown>[]).map(
    (f) => `{"name":${JSON.stringify(f.name)},"type":${canonical(f.type, inner)}}`,
  );
  return `${head},"fields":[${fields.join(',')}]}`;
}

/** The Parsing Canonical Form of a schema (schema JSON or a parsed avsc type). */
export function parsingCanonicalForm(schema: unknown): string {
  const json = schema instanceof avsc.Type ? schema.schema({ exportAttrs: false }) : schema;
  return canonical(json, undefined);
}

/** CRC-64-AVRO of the Parsing Canonical Form: the schema fingerprint single-object encoding uses. */
export function schemaFingerprint(schema: unknown): bigint {
  return crc64Avro(parsingCanonicalForm(schema));
}
