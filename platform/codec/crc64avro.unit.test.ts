import { describe, expect, it } from 'vitest';
import {
  CRC64_AVRO_EMPTY,
  crc64Avro,
  fingerprintBytes,
  fingerprintFromBytes,
  fingerprintHex,
} from './crc64avro.js';

// Known vectors, all computed outside avsc and outside this project:
// - SPEC: the "fingerprint" lines of Apache Avro's share/test/data/schema-tests.txt (apache/avro,
//   cross-checked there by Java's direct implementation), signed 64-bit as Java prints them,
//   each the fingerprint of the canonical form next to it.
// - PYTHON: Apache's Python avro 1.12.2 in a throwaway venv (`python3 -m venv /tmp/avrovenv &&
//   /tmp/avrovenv/bin/pip install avro`), `avro.schema._crc_64_fingerprint(data).hex()`, which
//   returns the 8 bytes little-endian (wire order).
const SPEC: [canonical: string, fingerprint: string][] = [
  ['"null"', '7195948357588979594'],
  ['"boolean"', '-6970731678124411036'],
  ['"int"', '8247732601305521295'],
  ['"long"', '-3434872931120570953'],
  ['"float"', '5583340709985441680'],
  ['"double"', '-8181574048448539266'],
  ['"bytes"', '5746618253357095269'],
  ['"string"', '-8142146995180207161'],
  ['[]', '-1241056759729112623'],
  ['["int"]', '-5232228896498058493'],
  ['["int","boolean"]', '5392556393470105090'],
  ['{"name":"foo","type":"record","fields":[]}', '-4824392279771201922'],
  ['{"name":"x.y.foo","type":"record","fields":[]}', '5916914534497305771'],
  ['{"name":"a.b.foo","type":"record","fields":[]}', '-4616218487480524110'],
  ['{"name":"foo","type":"record","fields":[{"name":"f1","type":"boolean"}]}', '7843277075252814651'],
  [
    '{"name":"foo","type":"record","fields":[{"name":"f1","type":"boolean"},{"name":"f2","type":"int"}]}',
    '-4860222112080293046',
  ],
  ['{"name":"foo","type":"enum","symbols":["A1"]}', '-6342190197741309591'],
  ['{"name":"x.y.z.foo","type":"enum","symbols":["A1","A2"]}', '-4448647247586288245'],
  ['{"name":"foo","type":"fixed","size":15}', '1756455273707447556'],
  ['{"name":"x.y.z.foo","type":"fixed","size":32}', '-3064184465700546786'],
  ['{"type":"array","items":"null"}', '-589620603366471059'],
  ['{"type":"map","values":"string"}', '-8732877298790414990'],
  [
    '{"name":"PigValue","type":"record","fields":[{"name":"value","type":["null","int","long","PigValue"]}]}',
    '-1759257747318642341',
  ],
];

const PYTHON: [input: string, wireHex: string][] = [
  ['', '95a7d7a43a215dc1'],
  ['a', 'e210cf453b66de0a'],
  ['abc', '043896e25c87ef1b'],
  ['"int"', '8f5c393f1ad57572'],
  ['ünïcödé', '87f570c7b33a6e0f'],
];

describe('CRC-64-AVRO', () => {
  it.each(SPEC)('matches the Avro spec test vector for %s', (canonical, signed) => {
    expect(crc64Avro(canonical)).toBe(BigInt.asUintN(64, BigInt(signed)));
  });

  it.each(PYTHON)('matches Apache Python avro for %j', (input, hex) => {
    expect(fingerprintHex(crc64Avro(input))).toBe(hex);
    expect(fingerprintHex(crc64Avro(Buffer.from(input, 'utf8')))).toBe(hex);
  });

  it('is the empty fingerprint for no input', () => {
    expect(crc64Avro(new Uint8Array())).toBe(CRC64_AVRO_EMPTY);
  });

  it('puts the 8 bytes on the wire little-endian and reads them back', () => {
    const fp = BigInt.asUintN(64, 8247732601305521295n);
    const bytes = fingerprintBytes(fp);
    expect([...bytes]).toEqual([0x8f, 0x5c, 0x39, 0x3f, 0x1a, 0xd5, 0x75, 0x72]);
    expect(fingerprintFromBytes(bytes)).toBe(fp);
    expect(fingerprintHex(bytes)).toBe('8f5c393f1ad57572');
    expect(fingerprintHex(fp)).toBe('8f5c393f1ad57572');
    expect(() => fingerprintHex(Buffer.alloc(7))).toThrow(RangeError);
  });
});
