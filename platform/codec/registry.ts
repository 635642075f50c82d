// The schema registry: every published schema version keyed by its fingerprint, and the
// current schema of each event. Writers encode with the current schema; readers look the
// writer schema up by the fingerprint in the single-object header and read with their own
// (current) schema through an avsc resolver, so that old and new versions interoperate by the
// Avro resolution rules. Resolvers are built once per writer fingerprint and cached.
import type avsc from 'avsc';
import type { EventName, EventPayloads } from '../../schemas/types.generated.js';
import { DeclaredLengthError, lengthChecker } from './bounded.js';
import { parseSchema, schemaFingerprint } from './canonical.js';
import { fingerprintBytes, fingerprintHex } from './crc64avro.js';
import { DecodeError, EncodeError, type EncodeIssue } from './errors.js';
import {
  loadSchemaSources,
  parseSchemaFileName,
  SCHEMAS_DIR,
  type SchemaSource,
  VERSION_ATTRIBUTE,
} from './schema-files.js';
import { frame, HEADER_LENGTH, SINGLE_OBJECT_MAGIC, unframe } from './single-object.js';

export { fingerprintHex } from './crc64avro.js';

export interface SchemaInfo {
  /** Short name, the event name (e.g. RolloutGroupScored). */
  name: string;
  /** Full Avro name (e.g. rods.v1.RolloutGroupScored). */
  fullName: string;
  version: number;
  /** CRC-64-AVRO of the Parsing Canonical Form, 16 hex digits in wire order. */
  fingerprint: string;
  /** True for the version writers use today; older published versions are retired. */
  current: boolean;
  /** The published file of this version. */
  file: string;
}

export interface Decoded<N extends string = string, P = unknown> {
  name: N;
  /** Writer fingerprint, 8 bytes in wire order. */
  fingerprint: Buffer;
  /** Version of the writer schema (the payload has the shape of the reader's current schema). */
  version: number;
  payload: P;
}

export type DecodedEvent = { [N in EventName]: Decoded<N, EventPayloads[N]> }[EventName];

type Resolver = ReturnType<avsc.Type['createResolver']>;

interface Entry {
  info: SchemaInfo;
  type: avsc.Type;
  fingerprint: Buffer;
  /** The body's declared lengths checked against its size (compiled on first use). */
  lengths?: (body: Uint8Array) => number;
}

function versionOf(source: SchemaSource): number {
  const v = (source.schema as Record<string, unknown> | null)?.[VERSION_ATTRIBUTE];
  if (typeof v !== 'number' || !Number.isInteger(v) || v < 1) {
    throw new Error(
      `${source.file}: "${VERSION_ATTRIBUTE}" must be a positive integer, got ${JSON.stringify(v)}`,
    );
  }
  return v;
}

function entryOf(source: SchemaSource, current: boolean): Entry {
  let type: avsc.Type;
  try {
    type = parseSchema(source.schema);
  } catch (e) {
    throw new Error(`${source.file}: invalid Avro schema: ${(e as Error).message}`);
  }
  if (type.typeName !== 'record' || !type.name) {
    throw new Error(`${source.file}: an event schema must be a named record`);
  }
  const fullName = type.name;
  const name = fullName.slice(fullName.lastIndexOf('.') + 1);
  const version = versionOf(source);
  const fromFile = parseSchemaFileName(source.file);
  if (fromFile.name !== name) {
    throw new Error(`${source.file}: the file name says ${fromFile.name} but the schema is ${fullName}`);
  }
  if (fromFile.version !== undefined && fromFile.version !== version) {
    throw new Error(
      `${source.file}: the file name says version ${fromFile.version} but "${VERSION_ATTRIBUTE}" is ${version}`,
    );
  }
  const fp = schemaFingerprint(source.schema);
  return {
    info: { name, fullName, version, fingerprint: fingerprintHex(fp), current, file: source.file },
    type,
    fingerprint: fingerprintBytes(fp),
  };
}

/** Abbreviated rendering of a value for error messages. */
function show(value: unknown): string {
  if (value === undefined) return 'undefined';
  if (Buffer.isBuffer(value)) return `<${value.length} bytes>`;
  let s: string;
  try {
    s = typeof value === 'number' && !Number.isFinite(value) ? String(value) : JSON.stringify(value);
  } catch {
    s = String(value);
  }
  return s.length > 60 ? `${s.slice(0, 57)}...` : s;
}

function describe(t: avsc.Type): string {
  switch (t.typeName) {
    case 'enum':
      return `one of ${(t as avsc.types.EnumType).symbols.join('|')}`;
    case 'array':
      return `array of ${describe((t as avsc.types.ArrayType).itemsType)}`;
    case 'map':
      return `map of ${describe((t as avsc.types.MapType).valuesType as avsc.Type)}`;
    case 'union:unwrapped':
    case 'union:wrapped':
      return (t as avsc.types.UnwrappedUnionType).types.map(describe).join(' or ');
    case 'record':
    case 'error':
      return `record ${t.name}`;
    case 'long':
    case 'int':
      return `${t.typeName} (an integer)`;
    default:
      return t.name ?? t.typeName;
  }
}

/** The branch of a nullable union that has children (record, array or map), else the type itself. */
function container(t: avsc.Type): avsc.Type {
  if (t.typeName.startsWith('union')) {
    const branch = (t as avsc.types.UnwrappedUnionType).types.find((b) =>
      ['record', 'error', 'array', 'map'].includes(b.typeName),
    );
    return branch ?? t;
  }
  return t;
}

/** Renders an avsc error-hook path (`['stats', 'band']`, `['rewards', '2']`) as `stats.band`, `rewards[2]`. */
function formatPath(root: avsc.Type, segments: string[]): string {
  let t: avsc.Type | undefined = root;
  let out = '';
  for (const seg of segments) {
    const c: avsc.Type | undefined = t && container(t);
    if (c?.typeName === 'array') {
      out += `[${seg}]`;
      t = (c as avsc.types.ArrayType).itemsType;
    } else if (c?.typeName === 'map') {
      out += `[${JSON.stringify(seg)}]`;
      t = (c as avsc.types.MapType).valuesType as avsc.Type;
    } else {
      out += out ? `.${seg}` : seg;
      t = c?.typeName === 'record' ? (c as avsc.types.RecordType).field(seg)?.type : undefined;
    }
  }
  return out;
}

function hasPath(value: unknown, segments: string[]): boolean {
  let v = value;
  for (const seg of segments) {
    if (v === null || typeof v !== 'object' || !(seg in v)) return false;
    v = (v as Record<string, unknown>)[seg];
  }
  return true;
}

/** Every place where `value` does not match `type`, with field paths (empty when valid). */
export function validationIssues(type: avsc.Type, value: unknown): EncodeIssue[] {
  const issues: EncodeIssue[] = [];
  type.isValid(value, {
    errorHook: (path: string[], val: unknown, t: avsc.Type) => {
      issues.push({
        path: formatPath(type, path),
        expected: describe(t),
        got: path.length > 0 && !hasPath(value, path) ? 'missing' : show(val),
      });
    },
  });
  // avsc reports a record with undeclared fields as a whole (and skips its fields), hence a
  // second pass that keeps only those reports, as one issue per undeclared field.
  type.isValid(value, {
    noUndeclaredFields: true,
    errorHook: (path: string[], val: unknown, t: avsc.Type) => {
      if (t.typeName !== 'record' || val === null || typeof val !== 'object' || Array.isArray(val)) return;
      const declared = new Set((t as avsc.types.RecordType).fields.map((f) => f.name));
      for (const k of Object.keys(val).filter((key) => !declared.has(key))) {
        issues.push({
          path: formatPath(type, [...path, k]),
          expected: `no such field in ${t.name}`,
          got: show((val as Record<string, unknown>)[k]),
        });
      }
    },
  });
  return issues;
}

export class SchemaRegistry {
  private readonly byFingerprint = new Map<string, Entry>();
  private readonly currentByName = new Map<string, Entry>();
  private readonly resolvers = new Map<string, Resolver | null | DecodeError>();

  /**
   * Checks the set as a whole: file names agree with the schemas, versions are unique, every
   * current schema is identical (same fingerprint) to its published copy of the same version,
   * and no two published versions share a fingerprint.
   */
  constructor(published: SchemaSource[], current: SchemaSource[]) {
    const byVersion = new Map<string, Entry>();
    for (const source of published) {
      const e = entryOf(source, false);
      const key = `${e.info.name}@${e.info.version}`;
      const same = byVersion.get(key);
      if (same) throw new Error(`${source.file}: version ${e.info.version} is also ${same.info.file}`);
      const clash = this.byFingerprint.get(e.info.fingerprint);
      if (clash) {
        throw new Error(
          `${source.file}: same canonical form (fingerprint ${e.info.fingerprint}) as ${clash.info.file}; ` +
            'a new version must change the schema',
        );
      }
      byVersion.set(key, e);
      this.byFingerprint.set(e.info.fingerprint, e);
    }
    for (const source of current) {
      const c = entryOf(source, true);
      if (this.currentByName.has(c.info.name)) {
        throw new Error(`${source.file}: two current schemas named ${c.info.name}`);
      }
      const pub = byVersion.get(`${c.info.name}@${c.info.version}`);
      if (!pub) {
        throw new Error(
          `${source.file}: version ${c.info.version} of ${c.info.name} is not published; ` +
            `copy it to schemas/published/${c.info.name}.v${c.info.version}.avsc`,
        );
      }
      if (pub.info.fingerprint !== c.info.fingerprint) {
        throw new Error(
          `${source.file}: differs from ${pub.info.file} (fingerprint ${c.info.fingerprint} vs ${pub.info.fingerprint}); ` +
            'a changed schema needs a new version: bump "rods.version" and publish it, keeping the old file',
        );
      }
      pub.info.current = true;
      this.currentByName.set(c.info.name, pub);
    }
  }

  /** The registry of the project's schema files (schemas/published and schemas/events). */
  static load(root: string = SCHEMAS_DIR): SchemaRegistry {
    const { published, current } = loadSchemaSources(root);
    return new SchemaRegistry(published, current);
  }

  /** Every published version, by name then version. */
  list(): SchemaInfo[] {
    return [...this.byFingerprint.values()]
      .map((e) => ({ ...e.info }))
      .sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : a.version - b.version));
  }

  /** Names of the events with a current schema. */
  names(): string[] {
    return [...this.currentByName.keys()].sort();
  }

  current(name: string): SchemaInfo | undefined {
    const e = this.currentByName.get(name);
    return e && { ...e.info };
  }

  /** Encodes a payload with the event's current schema as an Avro single-object record. */
  encode(name: string, payload: unknown): Buffer {
    const e = this.currentByName.get(name);
    if (!e) {
      throw new EncodeError(
        'unknown-event',
        name,
        `unknown event "${name}" (known: ${this.names().join(', ')})`,
      );
    }
    return this.encodeEntry(e, payload);
  }

  /**
   * Encodes with one published version, named by its fingerprint (16 hex digits): what the
   * outbox relay uses so an event stored under an older schema goes out under that schema.
   */
  encodeWith(fingerprint: string, payload: unknown): Buffer {
    const e = this.byFingerprint.get(fingerprint.toLowerCase());
    if (!e) {
      throw new EncodeError(
        'unknown-event',
        fingerprint,
        `no published schema has fingerprint ${fingerprint}`,
      );
    }
    return this.encodeEntry(e, payload);
  }

  /**
   * A reusable encoder of one event with its current schema: the bytes encode() gives, checked
   * in one validity pass (the issues are worked out only for a payload that fails it, to throw
   * the same EncodeError) and written with one copy. For hot paths that encode many records.
   */
  encoder(name: string): (payload: unknown) => Buffer {
    const e = this.currentByName.get(name);
    if (!e) return (payload) => this.encode(name, payload);
    let scratch = Buffer.alloc(4096);
    const header = () => {
      SINGLE_OBJECT_MAGIC.copy(scratch, 0);
      e.fingerprint.copy(scratch, SINGLE_OBJECT_MAGIC.length);
    };
    header();
    return (payload) => {
      if (!e.type.isValid(payload, { noUndeclaredFields: true })) return this.encodeEntry(e, payload);
      let end = e.type.encode(payload, scratch, HEADER_LENGTH);
      if (end < 0) {
        scratch = Buffer.alloc(2 * (scratch.length - end));
        header();
        end = e.type.encode(payload, scratch, HEADER_LENGTH);
      }
      return Buffer.from(scratch.subarray(0, end));
    };
  }

  private encodeEntry(e: Entry, payload: unknown): Buffer {
    const name = e.info.name;
    const issues = validationIssues(e.type, payload);
    if (issues.length > 0) {
      const what = issues.map((i) => `${i.path || '(payload)'}: expected ${i.expected}, got ${i.got}`);
      throw new EncodeError(
        'invalid-payload',
        name,
        `${name} payload does not match ${e.info.fullName} v${e.info.version}: ${what.join('; ')}`,
        issues,
      );
    }
    return frame(e.fingerprint, e.type.toBuffer(payload));
  }

  /**
   * Decodes an Avro single-object record: finds the writer schema by fingerprint and reads the
   * body with the current schema of that event (the writer schema itself when the event has no
   * current schema any more). Throws DecodeError.
   */
  decode(bytes: Uint8Array): Decoded {
    const { fingerprint, body } = unframe(bytes);
    const hex = fingerprint.toString('hex');
    const writer = this.byFingerprint.get(hex);
    if (!writer) {
      throw new DecodeError('unknown-fingerprint', `no published schema has fingerprint ${hex}`, {
        fingerprint: hex,
      });
    }
    const reader = this.currentByName.get(writer.info.name) ?? writer;
    const resolver = this.resolver(writer, reader);
    const what = `${writer.info.fullName} v${writer.info.version}`;
    // Before avsc allocates anything from a count the body declares (platform/codec/bounded.ts).
    writer.lengths ??= lengthChecker(writer.type);
    try {
      writer.lengths(body);
    } catch (e) {
      if (!(e instanceof DeclaredLengthError)) throw e;
      throw new DecodeError('declared-length', `${what} body refused: ${e.message}`, { fingerprint: hex });
    }
    let result: { value: unknown; offset: number };
    try {
      result = reader.type.decode(body, 0, resolver ?? undefined);
    } catch (e) {
      throw new DecodeError('body-invalid', `${what} body does not decode: ${(e as Error).message}`, {
        fingerprint: hex,
        cause: e,
      });
    }
    if (result.offset < 0) {
      throw new DecodeError('body-invalid', `${what} body is truncated (${body.length} bytes)`, {
        fingerprint: hex,
      });
    }
    if (result.offset !== body.length) {
      throw new DecodeError(
        'trailing-bytes',
        `${what} body has ${body.length - result.offset} trailing bytes after ${result.offset} decoded`,
        { fingerprint: hex },
      );
    }
    return {
      name: writer.info.name,
      fingerprint: Buffer.from(fingerprint),
      version: writer.info.version,
      payload: result.value,
    };
  }

  private resolver(writer: Entry, reader: Entry): Resolver | null {
    const key = writer.info.fingerprint;
    let r = this.resolvers.get(key);
    if (r === undefined) {
      if (writer === reader) r = null;
      else {
        try {
          r = reader.type.createResolver(writer.type);
        } catch (e) {
          r = new DecodeError(
            'incompatible-schema',
            `${reader.info.fullName} v${reader.info.version} cannot read data written with v${writer.info.version} ` +
              `(fingerprint ${key}): ${(e as Error).message}`,
            { fingerprint: key, cause: e },
          );
        }
      }
      this.resolvers.set(key, r);
    }
    if (r instanceof DecodeError) throw r;
    return r;
  }
}

let shared: SchemaRegistry | undefined;

/** The registry of the project's schema files, loaded once. */
export function defaultRegistry(): SchemaRegistry {
  shared ??= SchemaRegistry.load();
  return shared;
}

/** Encodes an event with its current schema (Avro single-object encoding). Throws EncodeError. */
export function encode<N extends EventName>(name: N, payload: EventPayloads[N]): Buffer {
  return defaultRegistry().encode(name, payload);
}

/** A reusable encoder of one event (SchemaRegistry.encoder): the same bytes as encode(), faster. */
export function encoderFor<N extends EventName>(name: N): (payload: EventPayloads[N]) => Buffer {
  return defaultRegistry().encoder(name);
}

/** Decodes an Avro single-object record into the current shape of its event. Throws DecodeError. */
export function decode(bytes: Uint8Array): DecodedEvent {
  return defaultRegistry().decode(bytes) as DecodedEvent;
}

/** Every published schema version (current and retired). */
export function listSchemas(): SchemaInfo[] {
  return defaultRegistry().list();
}
