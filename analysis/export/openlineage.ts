// OpenLineage (spec 2-0-2) RunEvents for a campaign's synthesis runs: one event per synthesis,
// COMPLETE when it ended in CandidateValidated, FAIL when it ended in CandidateRejected (RUNNING
// while it has no outcome yet). The parent task (the boundary seed) is the input dataset, the
// child task (the candidate) the output dataset, both in namespace rods://<campaign>.
// Pure: no I/O, deterministic (the run id derives from the campaign and synthesis ids).
import { openLineageRunId, streams } from '../../domain/ids.js';

export const OPENLINEAGE_SCHEMA_URL = 'https://openlineage.io/spec/2-0-2/OpenLineage.json#/$defs/RunEvent';
export const ERROR_FACET_SCHEMA_URL =
  'https://openlineage.io/spec/facets/1-0-1/ErrorMessageRunFacet.json#/$defs/ErrorMessageRunFacet';
/** The producer URI in every event (override with RODS_OPENLINEAGE_PRODUCER). */
export const DEFAULT_PRODUCER = 'https://github.com/rods/rods/tree/v0.1.0';
export const SYNTHESIS_JOB = 'rods.synthesis';

export interface SynthesisEvent {
  streamId: string;
  type: string;
  payload: Record<string, unknown>;
  metadata: Record<string, unknown>;
}

export interface RunEvent {
  eventType: 'COMPLETE' | 'FAIL' | 'RUNNING';
  eventTime: string;
  run: { runId: string; facets: Record<string, unknown> };
  job: { namespace: string; name: string; facets: Record<string, unknown> };
  inputs: { namespace: string; name: string; facets: Record<string, unknown> }[];
  outputs: { namespace: string; name: string; facets: Record<string, unknown> }[];
  producer: string;
  schemaURL: string;
}

const VARIANT_SUFFIX = /~(miss_func|miss_param)$/;

export const lineageNamespace = (campaignId: string) => `rods://${campaignId}`;

const iso = (ms: unknown) => new Date(typeof ms === 'number' && Number.isFinite(ms) ? ms : 0).toISOString();

/**
 * One RunEvent per synthesis run found among `events` (each synthesis' own stream:
 * SynthesisStarted, StageCompleted, CandidateValidated / CandidateRejected), in start order.
 */
export function openLineageEvents(
  campaignId: string,
  events: readonly SynthesisEvent[],
  producer: string = DEFAULT_PRODUCER,
): RunEvent[] {
  const namespace = lineageNamespace(campaignId);
  const facetSchema = `${producer}/schemas/openlineage/RodsSynthesisRunFacet.json`;
  const runs = new Map<
    string,
    { started?: SynthesisEvent; stages: SynthesisEvent[]; outcome?: SynthesisEvent }
  >();
  for (const e of events) {
    const sid = e.payload.synthesisId;
    if (typeof sid !== 'string' || e.streamId !== streams.synthesis(sid)) continue;
    if (e.payload.campaignId !== campaignId) continue;
    let r = runs.get(sid);
    if (!r) {
      r = { stages: [] };
      runs.set(sid, r);
    }
    if (e.type === 'SynthesisStarted') r.started = e;
    else if (e.type === 'StageCompleted') r.stages.push(e);
    else if ((e.type === 'CandidateValidated' || e.type === 'CandidateRejected') && !r.outcome) r.outcome = e;
  }
  const out: RunEvent[] = [];
  for (const [synthesisId, r] of runs) {
    // An Augment variant's stream has no SynthesisStarted: it is part of its base's run (same
    // seed, selection and generator), and its input is the base candidate.
    const baseSynthesisId = VARIANT_SUFFIX.test(synthesisId) ? synthesisId.replace(VARIANT_SUFFIX, '') : null;
    const base = !r.started && baseSynthesisId ? runs.get(baseSynthesisId) : undefined;
    const started = r.started ?? base?.started;
    if (!started || (!r.started && r.stages.length === 0 && !r.outcome)) continue;
    const s = started.payload;
    const o = r.outcome;
    const eventType = !o ? 'RUNNING' : o.type === 'CandidateValidated' ? 'COMPLETE' : 'FAIL';
    const last = o ?? r.stages[r.stages.length - 1] ?? started;
    const seedTaskId = String(s.seedTaskId);
    const baseCandidateId = base?.outcome?.payload.candidateId;
    const input = typeof baseCandidateId === 'string' ? baseCandidateId : seedTaskId;
    const candidateId = typeof o?.payload.candidateId === 'string' ? o.payload.candidateId : null;
    const lineage = (o?.metadata.lineage ?? {}) as Record<string, unknown>;
    const facets: Record<string, unknown> = {
      rods_synthesis: {
        _producer: producer,
        _schemaURL: facetSchema,
        campaignId,
        synthesisId,
        seedTaskId,
        ...(base ? { baseSynthesisId } : {}),
        selectionEventId: s.selectionEventId ?? null,
        generatorModel: s.generatorModel ?? null,
        step: lineage.step ?? null,
        policyVersion: lineage.policyVersion ?? null,
        triggeringStats: lineage.triggeringStats ?? null,
        stages: r.stages.map((x) => ({
          stage: x.payload.stage,
          attempt: x.payload.attempt,
          model: x.payload.model ?? null,
          promptVersionHash: x.payload.promptVersionHash ?? null,
          outputHash: x.payload.outputHash,
        })),
        outcome: o?.type ?? null,
        ...(o?.type === 'CandidateValidated'
          ? {
              candidateHash: o.payload.candidateHash,
              judgeModel: o.payload.judgeModel ?? null,
              judgeVerdict: lineage.judgeVerdict ?? null,
              judgeScores: o.payload.judgeScores ?? {},
              refined: o.payload.refined === true,
            }
          : {}),
        ...(o?.type === 'CandidateRejected'
          ? { stage: o.payload.stage, reasonCode: o.payload.reasonCode, reason: o.payload.reason }
          : {}),
      },
    };
    if (o?.type === 'CandidateRejected') {
      facets.errorMessage = {
        _producer: producer,
        _schemaURL: ERROR_FACET_SCHEMA_URL,
        message: `${String(o.payload.reasonCode)}: ${String(o.payload.reason)}`,
        programmingLanguage: 'TypeScript',
      };
    }
    out.push({
      eventType,
      eventTime: iso(last.payload.occurredAt),
      run: { runId: openLineageRunId(campaignId, synthesisId), facets },
      job: { namespace, name: SYNTHESIS_JOB, facets: {} },
      inputs: [{ namespace, name: input, facets: {} }],
      outputs: candidateId ? [{ namespace, name: candidateId, facets: {} }] : [],
      producer,
      schemaURL: OPENLINEAGE_SCHEMA_URL,
    });
  }
  return out;
}
