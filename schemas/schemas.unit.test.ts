import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { parseSchema, parsingCanonicalForm } from '../platform/codec/canonical.js';
import { crc64Avro, fingerprintHex } from '../platform/codec/crc64avro.js';
import { SchemaRegistry } from '../platform/codec/registry.js';
import {
  loadSchemaSources,
  NAMESPACE,
  parseSchemaFileName,
  type SchemaSource,
  VERSION_ATTRIBUTE,
} from '../platform/codec/schema-files.js';
import { GENERATED_TYPES_FILE, generateTypes } from '../platform/codec/typegen.js';

const { published, current } = loadSchemaSources();

// The event catalogue of docs/architecture.md §2, plus the DLQ record and the relay's reference.
const CATALOGUE = [
  'RolloutGroupScored',
  'StepClosed',
  'TaskStatsUpdated',
  'TaskBandChanged',
  'StepStatsRecorded',
  'StepAggregated',
  'StepSkipped',
  'CampaignStarted',
  'CampaignReconfigured',
  'CampaignPaused',
  'CampaignResumed',
  'CampaignStopped',
  'TaskSeeded',
  'SeedSelected',
  'SynthesisStarted',
  'StageCompleted',
  'StageFailed',
  'CandidateValidated',
  'CheckpointSaved',
  'CandidateRejected',
  'TaskInjected',
  'TaskRetired',
  'PoolPruned',
  'EvaluationStarted',
  'EvaluationTaskScored',
  'EvaluationCompleted',
  'EvaluationFailed',
  'DeadLettered',
  'EventReferenced',
  'AuditAnchored',
];

type Json = Record<string, unknown>;

function nameOf(s: SchemaSource): string {
  return (s.schema as Json).name as string;
}

function versionOf(s: SchemaSource): number {
  return (s.schema as Json)[VERSION_ATTRIBUTE] as number;
}

/** Every place in a schema that lacks a doc: named types and fields. */
function undocumented(schema: unknown, where: string): string[] {
  if (Array.isArray(schema)) return schema.flatMap((s, i) => undocumented(s, `${where}|${i}`));
  if (schema === null || typeof schema !== 'object') return [];
  const s = schema as Json;
  const missing: string[] = [];
  if (['record', 'error', 'enum', 'fixed'].includes(s.type as string) && !s.doc)
    missing.push(`${where} (${s.name})`);
  if (s.type === 'array') missing.push(...undocumented(s.items, `${where}[]`));
  if (s.type === 'map') missing.push(...undocumented(s.values, `${where}{}`));
  for (const f of (s.fields as Json[] | undefined) ?? []) {
    if (!f.doc) missing.push(`${where}.${f.name}`);
    missing.push(...undocumented(f.type, `${where}.${f.name}`));
  }
  return missing;
}

function field(s: SchemaSource, name: string): Json | undefined {
  return ((s.schema as Json).fields as Json[]).find((f) => f.name === name);
}

describe('schema files', () => {
  it('schemas/events holds exactly the event catalogue', () => {
    expect(current.map(nameOf).sort()).toEqual([...CATALOGUE].sort());
  });

  it.each(current.map((s) => [s.file, s] as const))('%s: namespace, version and a doc everywhere', (_, s) => {
    const schema = s.schema as Json;
    expect(schema.type).toBe('record');
    expect(schema.namespace).toBe(NAMESPACE);
    expect(parseSchemaFileName(s.file).name).toBe(schema.name);
    expect(Number.isInteger(schema[VERSION_ATTRIBUTE]) && (schema[VERSION_ATTRIBUTE] as number) >= 1).toBe(
      true,
    );
    expect(undocumented(schema, schema.name as string)).toEqual([]);
  });

  it.each(current.map((s) => [s.file, s] as const))('%s: event id, campaign and time', (_, s) => {
    expect(field(s, 'eventId')?.type).toEqual({ type: 'string', logicalType: 'uuid' });
    // Dead letters and audit anchors belong to no campaign.
    if (!['DeadLettered', 'AuditAnchored'].includes(nameOf(s)))
      expect(field(s, 'campaignId')?.type).toBe('string');
    const time = field(s, 'occurredAt') ?? field(s, 'producedAt');
    expect(time?.type).toEqual({ type: 'long', logicalType: 'timestamp-millis' });
  });

  it('every current schema is the highest published version and has the canonical form it was published with', () => {
    for (const s of current) {
      const versions = published.filter((p) => nameOf(p) === nameOf(s)).map(versionOf);
      expect(Math.max(...versions), s.file).toBe(versionOf(s));
      const copy = published.find((p) => nameOf(p) === nameOf(s) && versionOf(p) === versionOf(s));
      expect(copy, `${s.file} is not published`).toBeDefined();
      // Changing a schema that is already published needs a new version (keep the old file).
      expect(
        parsingCanonicalForm(s.schema),
        `${s.file} differs from ${copy!.file}: publish a new version`,
      ).toBe(parsingCanonicalForm(copy!.schema));
    }
  });

  it('published files: names and versions agree, versions run 1..N, every name is current', () => {
    const byName = new Map<string, number[]>();
    for (const p of published) {
      const fromFile = parseSchemaFileName(p.file);
      expect(fromFile.name, p.file).toBe(nameOf(p));
      expect(fromFile.version, p.file).toBe(versionOf(p));
      expect((p.schema as Json).namespace, p.file).toBe(NAMESPACE);
      byName.set(nameOf(p), [...(byName.get(nameOf(p)) ?? []), versionOf(p)]);
    }
    for (const [name, versions] of byName) {
      expect(
        versions.sort((a, b) => a - b),
        name,
      ).toEqual(versions.map((_, i) => i + 1));
    }
    expect([...byName.keys()].sort()).toEqual(current.map(nameOf).sort());
  });

  it('the registry accepts the files as a whole', () => {
    expect(() => new SchemaRegistry(published, current)).not.toThrow();
  });

  it('our canonical form agrees with the attribute-less export of avsc (which the codec reads with)', () => {
    for (const p of published) {
      expect(parsingCanonicalForm(p.schema), p.file).toBe(JSON.stringify(parseSchema(p.schema).schema()));
    }
  });

  // Fingerprints of the published v1 files (immutable, so these never change), computed with
  // Apache's Python avro 1.12.2 in a throwaway venv: the canonical form printed by this project
  // was parsed with `avro.schema.parse(pcf)`, its `canonical_form` checked equal to it, and
  // `.fingerprint('CRC-64-AVRO').hex()` taken (8 bytes, little-endian). (Python avro's own
  // canonical form of the files keeps logical-typed primitives as {"type":"long"} instead of
  // "long", against the spec's [PRIMITIVES] rule; Java and this project follow the spec.)
  const PYTHON_V1: Record<string, string> = {
    CampaignPaused: '69ec2790f37a5e29',
    CampaignReconfigured: 'd38f7cfe264398e1',
    CampaignResumed: '17ccdc7131a0279c',
    CampaignStarted: '0ca27d646253ed7f',
    CampaignStopped: 'f8670c2921f427cd',
    CandidateRejected: 'd7eac5ed9e5af6a6',
    CandidateValidated: '4802d000b10c7c9f',
    DeadLettered: '73d239c7c99c442b',
    PoolPruned: '365073e8d2db6fd3',
    RolloutGroupScored: '2645a7cc0c52eff3',
    SeedSelected: '246ddb9fa30e8d02',
    StageCompleted: 'd84dc37999432e84',
    StageFailed: '7a70cfbebd297d2b',
    StepAggregated: 'e9a9571b9463f13c',
    StepClosed: 'bbf740a91242bb5d',
    SynthesisStarted: 'de9144c141abd50f',
    TaskBandChanged: 'db43a7b46628c81c',
    TaskInjected: '20aee336eebb4944',
    TaskRetired: 'c875240a592f493e',
    TaskSeeded: 'e6f8982ffbbd01de',
    TaskStatsUpdated: 'd5e86b528eda7746',
  };

  it.each(Object.entries(PYTHON_V1))('%s v1 has the fingerprint Apache Python avro computes', (name, hex) => {
    const v1 = published.find((p) => nameOf(p) === name && versionOf(p) === 1);
    expect(v1).toBeDefined();
    expect(fingerprintHex(crc64Avro(parsingCanonicalForm(v1!.schema)))).toBe(hex);
  });
});

describe('schemas/types.generated.ts', () => {
  it('is up to date with schemas/events (run `npm run schemas:gen`)', () => {
    expect(readFileSync(GENERATED_TYPES_FILE, 'utf8')).toBe(generateTypes(current));
  });
});
