import avsc from 'avsc';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { EVENT_NAMES } from '../../schemas/types.generated.js';
import { SAMPLE_EVENTS } from '../../test/support/codec/samples.js';
import { fingerprintHex } from './crc64avro.js';
import { DecodeError, EncodeError } from './errors.js';
import { decode, defaultRegistry, encode, listSchemas, SchemaRegistry } from './registry.js';
import type { SchemaSource } from './schema-files.js';

afterEach(() => {
  vi.restoreAllMocks();
});

function thrown<E>(fn: () => unknown, cls: abstract new (...args: never[]) => E): E {
  try {
    fn();
  } catch (e) {
    expect(e).toBeInstanceOf(cls);
    return e as E;
  }
  throw new Error('expected an error');
}

describe('round trip of every event schema', () => {
  it.each(EVENT_NAMES)('%s encodes as a single-object record and decodes to the same payload', (name) => {
    const payload = SAMPLE_EVENTS[name];
    const bytes = encode(name, payload);
    const current = listSchemas().find((s) => s.name === name && s.current)!;
    expect([...bytes.subarray(0, 2)]).toEqual([0xc3, 0x01]);
    expect(bytes.subarray(2, 10).toString('hex')).toBe(current.fingerprint);
    const decoded = decode(bytes);
    expect(decoded.name).toBe(name);
    expect(decoded.version).toBe(current.version);
    expect(fingerprintHex(decoded.fingerprint)).toBe(current.fingerprint);
    expect(decoded.payload).toEqual(payload);
  });

  it('has a current schema for every generated event name and nothing else', () => {
    expect(defaultRegistry().names()).toEqual([...EVENT_NAMES].sort());
  });
});

describe('DecodeError', () => {
  const good = encode('TaskBandChanged', SAMPLE_EVENTS.TaskBandChanged);

  it('too-short: fewer bytes than the header', () => {
    const e = thrown(() => decode(Buffer.from([0xc3, 0x01, 0x12, 0x34])), DecodeError);
    expect(e.code).toBe('too-short');
    expect(e.message).toMatch(/4 bytes/);
  });

  it('bad-magic: not the 0xC3 0x01 marker', () => {
    const e = thrown(() => decode(Buffer.from('{"json":"not avro"}')), DecodeError);
    expect(e.code).toBe('bad-magic');
    expect(e.message).toMatch(/0x7b22/);
  });

  it('unknown-fingerprint: no published schema has it', () => {
    const bytes = Buffer.concat([
      Buffer.from([0xc3, 0x01]),
      Buffer.from('0011223344556677', 'hex'),
      Buffer.from([0]),
    ]);
    const e = thrown(() => decode(bytes), DecodeError);
    expect(e.code).toBe('unknown-fingerprint');
    expect(e.fingerprint).toBe('0011223344556677');
    expect(e.message).toMatch(/0011223344556677/);
  });

  it('body-invalid: truncated body', () => {
    const e = thrown(() => decode(good.subarray(0, good.length - 3)), DecodeError);
    expect(e.code).toBe('body-invalid');
    expect(e.message).toMatch(/rods\.v1\.TaskBandChanged v1 body is truncated/);
  });

  it('body-invalid: an enum index out of range', () => {
    // CampaignPaused-like layout is all strings; TaskBandChanged's `from` union index sits after
    // three strings (eventId, campaignId, taskId): make it 9.
    const body = good.subarray(10);
    let pos = 0;
    for (let i = 0; i < 3; i++) {
      const len = body[pos]! >> 1; // zig-zag varint, the sample strings are shorter than 64 bytes
      pos += 1 + len;
    }
    const bad = Buffer.from(good);
    bad[10 + pos] = 9 << 1;
    const e = thrown(() => decode(bad), DecodeError);
    expect(e.code).toBe('body-invalid');
    expect(e.message).toMatch(/does not decode: invalid union index/);
  });

  it('trailing-bytes: bytes left after the body', () => {
    const e = thrown(() => decode(Buffer.concat([good, Buffer.from([0, 0])])), DecodeError);
    expect(e.code).toBe('trailing-bytes');
    expect(e.message).toMatch(/2 trailing bytes/);
  });
});

describe('EncodeError', () => {
  it('unknown-event', () => {
    const e = thrown(() => defaultRegistry().encode('NoSuchEvent', {}), EncodeError);
    expect(e.code).toBe('unknown-event');
    expect(e.message).toMatch(/unknown event "NoSuchEvent"/);
  });

  it('names the field path of every mismatch', () => {
    const payload = {
      ...SAMPLE_EVENTS.TaskBandChanged,
      step: 1.5,
      stats: { ...SAMPLE_EVENTS.TaskBandChanged.stats, band: 'medium' },
      extra: true,
    } as unknown as (typeof SAMPLE_EVENTS)['TaskBandChanged'];
    const e = thrown(() => encode('TaskBandChanged', payload), EncodeError);
    expect(e.code).toBe('invalid-payload');
    expect(e.issues).toEqual([
      { path: 'step', expected: 'long (an integer)', got: '1.5' },
      { path: 'stats.band', expected: 'one of hard|boundary|mastered', got: '"medium"' },
      { path: 'extra', expected: 'no such field in rods.v1.TaskBandChanged', got: 'true' },
    ]);
    expect(e.message).toMatch(/stats\.band: expected one of hard\|boundary\|mastered, got "medium"/);
  });

  it('array items, map values and missing fields', () => {
    const scored = { ...SAMPLE_EVENTS.RolloutGroupScored, rewards: [0.5, 'x'] } as Record<string, unknown>;
    delete scored.taskId;
    const e = thrown(() => defaultRegistry().encode('RolloutGroupScored', scored), EncodeError);
    expect(e.issues).toEqual([
      { path: 'taskId', expected: 'string', got: 'missing' },
      { path: 'rewards[1]', expected: 'double', got: '"x"' },
    ]);
    const validated = { ...SAMPLE_EVENTS.CandidateValidated, judgeScores: { naturalness: 'high' } };
    const v = thrown(() => defaultRegistry().encode('CandidateValidated', validated), EncodeError);
    expect(v.issues.map((i) => i.path)).toEqual(['judgeScores["naturalness"]']);
  });

  it('a payload that is not an object', () => {
    const e = thrown(() => defaultRegistry().encode('StepClosed', null), EncodeError);
    expect(e.issues).toEqual([{ path: '', expected: 'record rods.v1.StepClosed', got: 'null' }]);
  });
});

// Schema evolution through the resolver, with a throwaway event "Probe" in four versions:
//   v1 id, count, hint (optional, default null), legacy (required)
//   v2 v1 + label (optional, default null)                      -- a new optional field
//   v3 v2 - hint                                                 -- a removed field with a default
//   v4 v3 - legacy                                               -- a removed field without one
const id = { name: 'id', type: 'string', doc: 'id' };
const count = { name: 'count', type: 'long', doc: 'count' };
const hint = { name: 'hint', type: ['null', 'string'], default: null, doc: 'hint' };
const legacy = { name: 'legacy', type: 'string', doc: 'legacy' };
const label = { name: 'label', type: ['null', 'string'], default: null, doc: 'label' };
const PROBE: Record<number, object[]> = {
  1: [id, count, hint, legacy],
  2: [id, count, hint, legacy, label],
  3: [id, count, legacy, label],
  4: [id, count, label],
};

function probe(version: number): object {
  return {
    type: 'record',
    name: 'Probe',
    namespace: 'rods.v1',
    doc: 'probe',
    'rods.version': version,
    fields: PROBE[version],
  };
}

function published(version: number): SchemaSource {
  return { file: `schemas/published/Probe.v${version}.avsc`, schema: probe(version) };
}

/** A process whose current Probe schema is `current` and that has the published files `known`. */
function registryAt(current: number, known: number[] = [1, 2, 3, 4]): SchemaRegistry {
  return new SchemaRegistry(known.map(published), [
    { file: 'schemas/events/Probe.avsc', schema: probe(current) },
  ]);
}

describe('schema evolution (Avro resolution by writer fingerprint)', () => {
  it('a newer reader fills a new optional field with its default', () => {
    const bytes = registryAt(1).encode('Probe', { id: 'a', count: 1, hint: 'h', legacy: 'l' });
    const d = registryAt(2).decode(bytes);
    expect(d.version).toBe(1);
    expect(d.payload).toEqual({ id: 'a', count: 1, hint: 'h', legacy: 'l', label: null });
  });

  it('an older reader ignores a field it does not know', () => {
    const bytes = registryAt(2).encode('Probe', { id: 'a', count: 2, hint: null, legacy: 'l', label: 'new' });
    const d = registryAt(1).decode(bytes);
    expect(d.version).toBe(2);
    expect(d.payload).toEqual({ id: 'a', count: 2, hint: null, legacy: 'l' });
  });

  it('a removed field: newer readers skip it, older readers use its default', () => {
    const v1 = registryAt(1).encode('Probe', { id: 'a', count: 3, hint: 'h', legacy: 'l' });
    expect(registryAt(3).decode(v1).payload).toEqual({ id: 'a', count: 3, legacy: 'l', label: null });
    const v3 = registryAt(3).encode('Probe', { id: 'b', count: 4, legacy: 'l', label: 'x' });
    expect(registryAt(1).decode(v3).payload).toEqual({ id: 'b', count: 4, hint: null, legacy: 'l' });
  });

  it('a removed field without a default: older readers cannot read it (incompatible-schema)', () => {
    const v4 = registryAt(4).encode('Probe', { id: 'c', count: 5, label: null });
    expect(
      registryAt(4, [1, 4]).decode(
        registryAt(1).encode('Probe', { id: 'd', count: 6, hint: null, legacy: 'l' }),
      ).payload,
    ).toEqual({
      id: 'd',
      count: 6,
      label: null,
    });
    const old = registryAt(1);
    const e = thrown(() => old.decode(v4), DecodeError);
    expect(e.code).toBe('incompatible-schema');
    expect(e.message).toMatch(/rods\.v1\.Probe v1 cannot read data written with v4/);
    expect(e.message).toMatch(/legacy/);
  });

  it('a reader without the writer version published does not guess', () => {
    const bytes = registryAt(2).encode('Probe', { id: 'a', count: 2, hint: null, legacy: 'l', label: 'new' });
    const e = thrown(() => registryAt(1, [1]).decode(bytes), DecodeError);
    expect(e.code).toBe('unknown-fingerprint');
  });

  it('builds one resolver per writer schema and reuses it', () => {
    const spy = vi.spyOn(avsc.Type.prototype, 'createResolver');
    const reader = registryAt(2);
    const bytes = registryAt(1).encode('Probe', { id: 'a', count: 1, hint: null, legacy: 'l' });
    for (let i = 0; i < 5; i++) reader.decode(bytes);
    // avsc recurses into the fields; count only the resolvers built for the record itself.
    const forProbe = spy.mock.calls.filter(([writer]) => writer.name === 'rods.v1.Probe');
    expect(forProbe).toHaveLength(1);
  });
});

describe('registry consistency checks', () => {
  it('refuses a current schema that differs from its published copy of the same version', () => {
    const changed = { ...probe(1), fields: [id, count] };
    expect(
      () => new SchemaRegistry([published(1)], [{ file: 'schemas/events/Probe.avsc', schema: changed }]),
    ).toThrow(/differs from schemas\/published\/Probe\.v1\.avsc.*needs a new version/);
  });

  it('accepts a change that leaves the canonical form alone (docs)', () => {
    const documented = { ...probe(1), doc: 'a better description' };
    const r = new SchemaRegistry([published(1)], [{ file: 'schemas/events/Probe.avsc', schema: documented }]);
    expect(r.current('Probe')?.version).toBe(1);
  });

  it('refuses an unpublished current version', () => {
    expect(() => registryAt(2, [1])).toThrow(/version 2 of Probe is not published/);
  });

  it('refuses a version attribute that disagrees with the file name', () => {
    const wrong = { file: 'schemas/published/Probe.v2.avsc', schema: probe(1) };
    expect(() => new SchemaRegistry([wrong], [])).toThrow(/file name says version 2/);
  });

  it('refuses two published versions with the same canonical form', () => {
    const same = { file: 'schemas/published/Probe.v2.avsc', schema: { ...probe(1), 'rods.version': 2 } };
    expect(() => new SchemaRegistry([published(1), same], [])).toThrow(/same canonical form/);
  });

  it('lists retired versions next to the current one', () => {
    const list = registryAt(3).list();
    expect(list.map((s) => [s.name, s.version, s.current])).toEqual([
      ['Probe', 1, false],
      ['Probe', 2, false],
      ['Probe', 3, true],
      ['Probe', 4, false],
    ]);
  });
});
