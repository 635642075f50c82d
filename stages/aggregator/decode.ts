// Bytes to what the aggregator reads: a reward group, a step closing, or the dead-letter note
// that says why the record cannot be read. Pure CPU, done outside the batch's transaction.

import { eventIdProblem, unstorableProblem } from '../../domain/record-checks.js';
import type { SchemaRegistry } from '../../platform/codec/registry.js';
import { decodeOrReason } from '../../platform/kafka/dlq.js';
import { type DecodedBatch, deadLetterNote, type RewardRecord } from './records.js';

export type { Closing, DeadLetterNote, DecodedBatch, Group, RewardRecord } from './records.js';
export { deadLetterNote } from './records.js';

/** Decodes one partition's records in offset order. */
export function decodeBatch(
  records: readonly RewardRecord[],
  source: { topic: string; partition: number; registry: SchemaRegistry },
): DecodedBatch {
  const out: DecodedBatch = { groups: [], closings: [], dead: [] };
  for (const m of records) {
    const r = decodeOrReason(
      { topic: source.topic, partition: source.partition, message: m },
      { registry: source.registry, accept: ['RolloutGroupScored', 'StepClosed'] },
    );
    if (!('decoded' in r)) {
      out.dead.push(deadLetterNote(m, r.code, r.reason));
      continue;
    }
    const d = r.decoded;
    if (d.name === 'RolloutGroupScored') {
      const p = d.payload;
      const problem =
        eventIdProblem(p.eventId) ??
        unstorableProblem({ campaignId: p.campaignId, taskId: p.taskId, policyVersion: p.policyVersion });
      if (problem) {
        out.dead.push(deadLetterNote(m, problem.code, problem.reason));
        continue;
      }
      out.groups.push({
        offset: m.offset,
        eventId: p.eventId.toLowerCase(),
        campaignId: p.campaignId,
        taskId: p.taskId,
        step: p.step,
        rewards: p.rewards,
        policyVersion: p.policyVersion,
        key: m.key,
        value: m.value,
      });
    } else if (d.name === 'StepClosed') {
      const problem = unstorableProblem({ campaignId: d.payload.campaignId });
      if (problem) {
        out.dead.push(deadLetterNote(m, problem.code, problem.reason));
        continue;
      }
      out.closings.push({
        offset: m.offset,
        campaignId: d.payload.campaignId,
        step: d.payload.step,
        groupCount: d.payload.groupCount,
        key: m.key,
        value: m.value,
      });
    }
  }
  return out;
}
