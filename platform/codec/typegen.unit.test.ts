import { describe, expect, it } from 'vitest';
import { generateTypes } from './typegen.js';

const kitchen = {
  type: 'record',
  name: 'Kitchen',
  namespace: 'rods.v1',
  doc: 'Every mapping.',
  fields: [
    { name: 'at', type: { type: 'long', logicalType: 'timestamp-millis' }, doc: 'long' },
    { name: 'n', type: 'int', doc: 'int */ end' },
    { name: 'ok', type: 'boolean', doc: 'b' },
    { name: 'raw', type: 'bytes', doc: 'bytes' },
    { name: 'maybe', type: ['null', 'string'], default: null, doc: 'nullable' },
    {
      name: 'band',
      type: { type: 'enum', name: 'Band', doc: 'band', symbols: ['hard', 'boundary'] },
      doc: 'e',
    },
    { name: 'bands', type: { type: 'array', items: ['null', 'Band'] }, doc: 'array of nullable' },
    { name: 'scores', type: { type: 'map', values: 'double' }, doc: 'map' },
    {
      name: 'child',
      type: { type: 'record', name: 'Child', doc: 'child', fields: [{ name: 'x', type: 'float', doc: 'x' }] },
      doc: 'nested record',
    },
  ],
};

describe('type generation', () => {
  const out = generateTypes([{ file: 'schemas/events/Kitchen.avsc', schema: kitchen }]);

  it('maps Avro types to TypeScript', () => {
    expect(out).toContain("/** band */\nexport type Band = 'hard' | 'boundary';");
    expect(out).toContain('export interface Child {\n  /** x */\n  x: number;\n}');
    for (const line of [
      '  at: number;',
      '  n: number;',
      '  ok: boolean;',
      '  raw: Buffer;',
      '  maybe: string | null;',
      '  band: Band;',
      '  bands: (Band | null)[];',
      '  scores: Record<string, number>;',
      '  child: Child;',
    ]) {
      expect(out).toContain(line);
    }
    expect(out).toContain('/** int *\\/ end */');
    expect(out).toContain("export type EventName =\n  | 'Kitchen';");
    expect(out).toContain('export interface EventPayloads {\n  Kitchen: Kitchen;\n}');
  });

  it('declares a dependency before the type that uses it', () => {
    expect(out.indexOf('export type Band')).toBeLessThan(out.indexOf('export interface Kitchen'));
    expect(out.indexOf('export interface Child')).toBeLessThan(out.indexOf('export interface Kitchen'));
  });

  it('shares a named type defined identically in two files and refuses two different ones', () => {
    const other = (symbols: string[]) => ({
      type: 'record',
      name: 'Other',
      namespace: 'rods.v1',
      doc: 'o',
      fields: [{ name: 'b', type: { type: 'enum', name: 'Band', doc: 'band', symbols }, doc: 'b' }],
    });
    const k = { file: 'schemas/events/Kitchen.avsc', schema: kitchen };
    const same = generateTypes([
      k,
      { file: 'schemas/events/Other.avsc', schema: other(['hard', 'boundary']) },
    ]);
    expect(same.match(/export type Band =/g)).toHaveLength(1);
    expect(() =>
      generateTypes([k, { file: 'schemas/events/Other.avsc', schema: other(['hard', 'mastered']) }]),
    ).toThrow(/Band differs from the type of the same name in schemas\/events\/Kitchen\.avsc/);
  });
});
