// Ids built by domain/ids.ts for a few inputs, compared between Node and the workflow sandbox
// (domain/sandbox.unit.test.ts): the SHA-256 of derived ids must not depend on where it runs.
import {
  campaignStreamPrefixes,
  candidateId,
  derivedUuid,
  eventIds,
  streams,
  synthesisId,
  workflowIds,
} from '../../../domain/ids.js';

export function idSamples(): Record<string, unknown> {
  const sid = synthesisId('demo-1', 3, 'multi_turn_base_17');
  return {
    sid,
    candidate: candidateId('multi_turn_base_17', 3),
    streams: [
      streams.campaign('demo-1'),
      streams.synthesis(sid),
      streams.stats('demo-1', 't', 2),
      streams.steps('x'),
    ],
    prefixes: campaignStreamPrefixes('demo-1'),
    workflows: [
      workflowIds.campaign('demo-1'),
      workflowIds.synthesis(sid),
      workflowIds.ingestion('demo-1', 3, 'b'),
    ],
    seedSelected: eventIds.seedSelected('demo-1', 'multi_turn_base_17', 3),
    stageCompleted: eventIds.stageCompleted(sid, 'plan', 2),
    nonAscii: derivedUuid('TaskSeeded', 'kampanj-å', 'tâche-€-😀', 'x\ud800y'),
  };
}
