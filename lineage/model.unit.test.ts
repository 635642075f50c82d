import { describe, expect, it } from 'vitest';
import { csvCell } from '../export/export.js';
import { OPENLINEAGE_SCHEMA_URL, openLineageEvents } from '../export/openlineage.js';
import {
  type LineageEvent,
  LineageIndex,
  lineageStats,
  renderDot,
  renderMermaid,
  renderTree,
} from './model.js';

const C = 'c1';
let pos = 0;
const ev = (
  type: string,
  streamId: string,
  payload: Record<string, unknown>,
  metadata: Record<string, unknown> = {},
  eventId = `e${pos + 1}`,
): LineageEvent => ({
  eventId,
  streamId,
  position: ++pos,
  type,
  payload: { campaignId: C, ...payload },
  metadata,
});

const stats = { mean: 0.5, phi: 1, groupCount: 2, band: 'boundary' };

/** A seed s, its child s~s2 (injected, then pruned), grandchild s~s2~s5 (injected), seed t retired. */
function events(): LineageEvent[] {
  pos = 0;
  const derive = (seed: string, child: string, step: number, depth: number, selId: string) => {
    const sid = `synth-${C}-${step}-${seed}`;
    return [
      ev(
        'SeedSelected',
        `campaign-${C}`,
        { seedTaskId: seed, step, phi: 0.9, quotaSlot: 0, stats },
        {},
        selId,
      ),
      ev('SynthesisStarted', `synthesis-${sid}`, {
        synthesisId: sid,
        seedTaskId: seed,
        selectionEventId: selId,
        generatorModel: 'gen',
      }),
      ev('StageCompleted', `synthesis-${sid}`, {
        synthesisId: sid,
        stage: 'plan',
        attempt: 0,
        model: 'gen',
        promptVersionHash: 'p'.repeat(64),
        outputHash: 'o'.repeat(64),
      }),
      ev('StageCompleted', `synthesis-${sid}`, {
        synthesisId: sid,
        stage: 'critique',
        attempt: 0,
        model: 'judge',
        promptVersionHash: 'q'.repeat(64),
        outputHash: 'r'.repeat(64),
      }),
      ev(
        'CandidateValidated',
        `synthesis-${sid}`,
        {
          synthesisId: sid,
          candidateId: child,
          seedTaskId: seed,
          candidateHash: `h-${child}`,
          judgeModel: 'judge',
          judgeScores: { alignment: 1 },
          refined: false,
        },
        {
          lineage: {
            parents: [seed],
            depth: depth - 1,
            step,
            policyVersion: `pv-${step}`,
            triggeringStats: stats,
            selectionEventId: selId,
            synthesisId: sid,
            models: { plan: 'gen' },
            promptVersions: { plan: 'p'.repeat(64) },
            stageOutputs: { plan: 'o'.repeat(64) },
            judgeVerdict: 'accept',
            judgeReasons: ['fine'],
          },
        },
      ),
      ev('TaskInjected', `campaign-${C}`, {
        taskId: child,
        candidateId: child,
        taskHash: `h-${child}`,
        parents: [seed],
        poolVersion: step + 1,
        step: step + 1,
      }),
    ];
  };
  return [
    ev('TaskSeeded', `campaign-${C}`, { taskId: 's', category: 'base', taskHash: 'hs', poolVersion: 1 }),
    ev('TaskSeeded', `campaign-${C}`, { taskId: 't', category: 'base', taskHash: 'ht', poolVersion: 1 }),
    ev('TaskBandChanged', `stats-${C}-x-0`, { taskId: 's', from: null, to: 'boundary', step: 1, stats }),
    ...derive('s', 's~s2', 2, 1, 'sel-1'),
    ...derive('s~s2', 's~s2~s5', 5, 2, 'sel-2'),
    ev('TaskRetired', `campaign-${C}`, { taskId: 't', rule: 'mastered', step: 4, poolVersion: 4, stats }),
    ev('PoolPruned', `campaign-${C}`, {
      pruned: [{ taskId: 's~s2', phi: 0.1 }],
      cap: 1,
      step: 7,
      poolVersion: 8,
    }),
    // Another campaign's event is ignored.
    { ...ev('TaskSeeded', 'campaign-other', { taskId: 'x' }), payload: { campaignId: 'other', taskId: 'x' } },
  ];
}

describe('lineage model', () => {
  it('walks a generated task back to its human seed with every derivation', () => {
    const index = new LineageIndex(C, events());
    expect(index.knows('x')).toBe(false);
    const l = index.lineage('s~s2~s5')!;
    expect(l.complete).toBe(true);
    expect(l.root.depth).toBe(2);
    expect(l.root.rootSeedId).toBe('s');
    const d = l.root.derivation!;
    expect(d).toMatchObject({
      synthesisId: `synth-${C}-5-s~s2`,
      parents: ['s~s2'],
      step: 5,
      policyVersion: 'pv-5',
      generatorModel: 'gen',
      judge: {
        model: 'judge',
        verdict: 'accept',
        scores: { alignment: 1 },
        reasons: ['fine'],
        refined: false,
      },
      selection: { eventId: 'sel-2', step: 5, phi: 0.9, quotaSlot: 0 },
    });
    expect(d.stages.map((s) => [s.stage, s.model])).toEqual([
      ['plan', 'gen'],
      ['critique', 'judge'],
    ]);
    expect(l.root.life).toMatchObject({ injected: { step: 6, poolVersion: 6 }, status: 'active' });
    const parent = l.root.parents[0]!;
    expect(parent.taskId).toBe('s~s2');
    expect(parent.life.pruned).toEqual({ step: 7, poolVersion: 8, phi: 0.1, cap: 1 });
    expect(parent.life.status).toBe('pruned');
    const seed = parent.parents[0]!;
    expect(seed).toMatchObject({ taskId: 's', origin: 'seed', depth: 0, derivation: null, parents: [] });
    expect(seed.life.bandChanges).toEqual([{ from: null, to: 'boundary', step: 1, stats }]);
    expect(index.lineage('t')!.root.life.retired).toMatchObject({ rule: 'mastered', step: 4 });
    expect(index.lineage('nope')).toBeUndefined();
  });

  it('marks a chain without a recorded parent as incomplete', () => {
    const evs = events().filter((e) => !(e.type === 'TaskSeeded' && e.payload.taskId === 's'));
    const l = new LineageIndex(C, evs).lineage('s~s2')!;
    expect(l.complete).toBe(false);
    expect(l.root.missingParents).toEqual(['s']);
    expect(renderTree(l)).toContain('INCOMPLETE');
  });

  it('renders tree, dot and mermaid', () => {
    const l = new LineageIndex(C, events()).lineage('s~s2~s5')!;
    const tree = renderTree(l);
    expect(tree).toContain('human seed s');
    expect(tree).toContain('judge: accept by judge');
    expect(tree).toContain('pruned: step 7');
    const dot = renderDot(l);
    expect(dot.startsWith('digraph lineage {')).toBe(true);
    expect(dot).toContain('"s" -> "s~s2"');
    expect(dot).toContain('"s~s2" -> "s~s2~s5"');
    const mermaid = renderMermaid(l);
    expect(mermaid.startsWith('graph TD\n')).toBe(true);
    expect(mermaid.match(/-->/g)?.length).toBe(2);
  });

  it('summarises by generation', () => {
    const s = lineageStats(new LineageIndex(C, events()));
    expect(s.tasks).toBe(4);
    expect(s.generations).toEqual([
      {
        depth: 0,
        tasks: 2,
        injected: 0,
        active: 1,
        retired: 1,
        pruned: 0,
        parents: 1,
        children: 1,
        meanBranching: 1,
        survivalShare: 0.5,
      },
      {
        depth: 1,
        tasks: 1,
        injected: 1,
        active: 0,
        retired: 0,
        pruned: 1,
        parents: 1,
        children: 1,
        meanBranching: 1,
        survivalShare: 0,
      },
      {
        depth: 2,
        tasks: 1,
        injected: 1,
        active: 1,
        retired: 0,
        pruned: 0,
        parents: 0,
        children: 0,
        meanBranching: 0,
        survivalShare: 1,
      },
    ]);
  });
});

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
});
