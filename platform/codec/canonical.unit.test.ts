import { describe, expect, it } from 'vitest';
import { parsingCanonicalForm, schemaFingerprint } from './canonical.js';

// Every case of Apache Avro's share/test/data/schema-tests.txt (apache/avro): input schema,
// expected Parsing Canonical Form and, where the file gives one, the fingerprint (signed 64-bit,
// as Java prints it). The file's own comment says Java's direct implementation cross-checks them.
const CASES: [input: string, canonical: string, fingerprint?: string][] = [
  ['"null"', '"null"', '7195948357588979594'],
  ['{"type":"null"}', '"null"'],
  ['"boolean"', '"boolean"', '-6970731678124411036'],
  ['{"type":"boolean"}', '"boolean"'],
  ['"int"', '"int"', '8247732601305521295'],
  ['{"type":"int"}', '"int"'],
  ['"long"', '"long"', '-3434872931120570953'],
  ['{"type":"long"}', '"long"'],
  ['"float"', '"float"', '5583340709985441680'],
  ['{"type":"float"}', '"float"'],
  ['"double"', '"double"', '-8181574048448539266'],
  ['{"type":"double"}', '"double"'],
  ['"bytes"', '"bytes"', '5746618253357095269'],
  ['{"type":"bytes"}', '"bytes"'],
  ['"string"', '"string"', '-8142146995180207161'],
  ['{"type":"string"}', '"string"'],
  ['[  ]', '[]', '-1241056759729112623'],
  ['[ "int"  ]', '["int"]', '-5232228896498058493'],
  ['[ "int" , {"type":"boolean"} ]', '["int","boolean"]', '5392556393470105090'],
  [
    '{"fields":[], "type":"record", "name":"foo"}',
    '{"name":"foo","type":"record","fields":[]}',
    '-4824392279771201922',
  ],
  [
    '{"fields":[], "type":"record", "name":"foo", "namespace":"x.y"}',
    '{"name":"x.y.foo","type":"record","fields":[]}',
    '5916914534497305771',
  ],
  [
    '{"fields":[], "type":"record", "name":"a.b.foo", "namespace":"x.y"}',
    '{"name":"a.b.foo","type":"record","fields":[]}',
    '-4616218487480524110',
  ],
  [
    '{"fields":[], "type":"record", "name":"foo", "doc":"Useful info"}',
    '{"name":"foo","type":"record","fields":[]}',
    '-4824392279771201922',
  ],
  [
    '{"fields":[], "type":"record", "name":"foo", "aliases":["foo","bar"]}',
    '{"name":"foo","type":"record","fields":[]}',
    '-4824392279771201922',
  ],
  [
    '{"fields":[], "type":"record", "name":"foo", "doc":"foo", "aliases":["foo","bar"]}',
    '{"name":"foo","type":"record","fields":[]}',
    '-4824392279771201922',
  ],
  [
    '{"fields":[{"type":{"type":"boolean"}, "name":"f1"}], "type":"record", "name":"foo"}',
    '{"name":"foo","type":"record","fields":[{"name":"f1","type":"boolean"}]}',
    '7843277075252814651',
  ],
  [
    '{ "fields":[{"type":"boolean", "aliases":[], "name":"f1", "default":"true"},' +
      ' {"order":"descending","name":"f2","doc":"Hello","type":"int"}], "type":"record", "name":"foo" }',
    '{"name":"foo","type":"record","fields":[{"name":"f1","type":"boolean"},{"name":"f2","type":"int"}]}',
    '-4860222112080293046',
  ],
  [
    '{"type":"enum", "name":"foo", "symbols":["A1"]}',
    '{"name":"foo","type":"enum","symbols":["A1"]}',
    '-6342190197741309591',
  ],
  [
    '{"namespace":"x.y.z", "type":"enum", "name":"foo", "doc":"foo bar", "symbols":["A1", "A2"]}',
    '{"name":"x.y.z.foo","type":"enum","symbols":["A1","A2"]}',
    '-4448647247586288245',
  ],
  [
    '{"name":"foo","type":"fixed","size":15}',
    '{"name":"foo","type":"fixed","size":15}',
    '1756455273707447556',
  ],
  [
    '{"namespace":"x.y.z", "type":"fixed", "name":"foo", "doc":"foo bar", "size":32}',
    '{"name":"x.y.z.foo","type":"fixed","size":32}',
    '-3064184465700546786',
  ],
  ['{ "items":{"type":"null"}, "type":"array"}', '{"type":"array","items":"null"}', '-589620603366471059'],
  ['{ "values":"string", "type":"map"}', '{"type":"map","values":"string"}', '-8732877298790414990'],
  [
    '{"name":"PigValue","type":"record", "fields":[{"name":"value", "type":["null", "int", "long", "PigValue"]}]}',
    '{"name":"PigValue","type":"record","fields":[{"name":"value","type":["null","int","long","PigValue"]}]}',
    '-1759257747318642341',
  ],
];

describe('Parsing Canonical Form', () => {
  it.each(CASES)('%s -> %s', (input, canonical, fingerprint) => {
    const schema = JSON.parse(input);
    expect(parsingCanonicalForm(schema)).toBe(canonical);
    if (fingerprint) expect(schemaFingerprint(schema)).toBe(BigInt.asUintN(64, BigInt(fingerprint)));
  });

  it('strips logical types, defaults and custom attributes such as rods.version', () => {
    const schema = {
      type: 'record',
      name: 'E',
      namespace: 'rods.v1',
      doc: 'd',
      'rods.version': 3,
      fields: [
        { name: 'at', type: { type: 'long', logicalType: 'timestamp-millis' }, doc: 'd' },
        { name: 'id', type: { type: 'string', logicalType: 'uuid' } },
        { name: 'b', type: { type: 'enum', name: 'Band', symbols: ['hard'], default: 'hard' } },
        { name: 'c', type: 'Band' },
        { name: 'n', type: ['null', 'string'], default: null, aliases: ['m'], order: 'ignore' },
      ],
    };
    expect(parsingCanonicalForm(schema)).toBe(
      '{"name":"rods.v1.E","type":"record","fields":[{"name":"at","type":"long"},{"name":"id","type":"string"},' +
        '{"name":"b","type":{"name":"rods.v1.Band","type":"enum","symbols":["hard"]}},' +
        '{"name":"c","type":"rods.v1.Band"},{"name":"n","type":["null","string"]}]}',
    );
  });

  it('changes when a field that matters for parsing changes', () => {
    const a = { type: 'record', name: 'E', fields: [{ name: 'x', type: 'int' }] };
    const b = { type: 'record', name: 'E', fields: [{ name: 'x', type: 'long' }] };
    expect(schemaFingerprint(a)).not.toBe(schemaFingerprint(b));
  });
});
