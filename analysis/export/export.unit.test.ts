import { describe, expect, it } from 'vitest';
import { C, ev, events } from '../../test/support/lineage/events.js';
import { csvCell } from './export.js';
import { OPENLINEAGE_SCHEMA_URL, openLineageEvents } from './openlineage.js';

describe('export helpers', () => {
  it('quotes CSV cells and writes nested values as JSON', () => {
    expect(csvCell(null)).toBe('');
    expect(csvCell(3)).toBe('3');
    expect(csvCell('a,b')).toBe('"a,b"');
    expect(csvCell('say "hi"\n')).toBe('"say ""hi""\n"');
    expect(csvCell({ a: [1, 'x'] })).toBe('"{""a"":[1,""x""]}"');
    expect(csvCell(new Date(0))).toBe('1970-01-01T00:00:00.000Z');
  });

  it('builds one OpenLineage RunEvent per synthesis', () => {
    const evs = [
      ...events(),
      ev('SynthesisStarted', `synthesis-bad`, { synthesisId: 'bad', seedTaskId: 't', selectionEventId: 'z' }),
      ev('CandidateRejected', `synthesis-bad`, {
        synthesisId: 'bad',
        seedTaskId: 't',
        candidateId: null,
        stage: 'plan',
        reasonCode: 'generator-unavailable',
        reason: 'down',
        occurredAt: 1000,
      }),
    ];
    const out = openLineageEvents(C, evs, 'https://example.org/rods');
    expect(out.map((e) => e.eventType)).toEqual(['COMPLETE', 'COMPLETE', 'FAIL']);
    const first = out[0]!;
    expect(first.inputs).toEqual([{ namespace: `rods://${C}`, name: 's', facets: {} }]);
    expect(first.outputs).toEqual([{ namespace: `rods://${C}`, name: 's~s2', facets: {} }]);
    expect(first.schemaURL).toBe(OPENLINEAGE_SCHEMA_URL);
    expect(first.producer).toBe('https://example.org/rods');
    const fail = out[2]!;
    expect(fail.outputs).toEqual([]);
    expect(fail.eventTime).toBe('1970-01-01T00:00:01.000Z');
    expect(fail.run.facets.errorMessage).toMatchObject({ message: 'generator-unavailable: down' });
    expect(new Set(out.map((e) => e.run.runId)).size).toBe(3);
  });

  it('exports an Augment variant as a run of its own, its input the base candidate', () => {
    const base = events();
    const baseStart = base.find((e) => e.type === 'SynthesisStarted')!;
    const sid = String(baseStart.payload.synthesisId);
    const baseOutcome = base.find((e) => e.type === 'CandidateValidated' && e.payload.synthesisId === sid)!;
    const vid = `${sid}~miss_param`;
    const evs = [
      ...base,
      ev('StageCompleted', `synthesis-${vid}`, {
        synthesisId: vid,
        stage: 'augment',
        attempt: 0,
        model: 'm',
        promptVersionHash: 'p',
        outputHash: 'o',
        occurredAt: 2000,
      }),
      ev('CandidateValidated', `synthesis-${vid}`, {
        synthesisId: vid,
        seedTaskId: baseStart.payload.seedTaskId,
        candidateId: `${baseOutcome.payload.candidateId}~miss_param`,
        candidateHash: 'h',
        occurredAt: 3000,
      }),
    ];
    const before = openLineageEvents(C, base);
    const out = openLineageEvents(C, evs);
    expect(out).toHaveLength(before.length + 1);
    const v = out.find((e) => (e.run.facets.rods_synthesis as { synthesisId: string }).synthesisId === vid)!;
    expect(v.eventType).toBe('COMPLETE');
    expect(v.inputs.map((i) => i.name)).toEqual([baseOutcome.payload.candidateId]);
    expect(v.outputs.map((o) => o.name)).toEqual([`${baseOutcome.payload.candidateId}~miss_param`]);
    expect(v.run.facets.rods_synthesis).toMatchObject({
      baseSynthesisId: sid,
      seedTaskId: baseStart.payload.seedTaskId,
    });
  });
});
