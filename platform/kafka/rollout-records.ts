// The records of an accepted rollout batch on the rewards topic: one RolloutGroupScored per group
// (key = task id) and, for the batch that closes its step, a StepClosed with the step's total
// group count. The gateway's direct publish and the ingestion activity both send exactly these,
// with ids derived from (campaign, step, batch id, task id), so whichever publishes, a group
// counts once.

import { eventIds } from '../../domain/ids.js';
import { encode, encoderFor } from '../codec/registry.js';
import type { OutgoingRecord } from './port.js';

/** An accepted rollout batch: what its records are made of. */
export interface RolloutBatchBody {
  campaignId: string;
  step: number;
  batchId: string;
  policyVersion: string;
  groups: { taskId: string; rewards: number[] }[];
  close: boolean;
  /** When the gateway accepted the batch (ms since the epoch): the events' producedAt. */
  receivedAt: number;
}

/** -0 is sent as 0, as JSON and so the claim check keep it: the same bytes from memory or the store. */
function hasNegativeZero(xs: number[]): boolean {
  for (const x of xs) if (x === 0 && 1 / x < 0) return true;
  return false;
}

let encodeGroup: ReturnType<typeof encoderFor<'RolloutGroupScored'>> | undefined;

/**
 * The RolloutGroupScored records of a batch's groups from..to (default all), in order (key =
 * task id), pushed onto `out`.
 */
export function rolloutGroupRecords(
  body: Omit<RolloutBatchBody, 'close'>,
  from = 0,
  to = body.groups.length,
  out: OutgoingRecord[] = [],
): OutgoingRecord[] {
  encodeGroup ??= encoderFor('RolloutGroupScored');
  const { campaignId, step, batchId, policyVersion, receivedAt } = body;
  for (let i = from; i < to; i++) {
    const g = body.groups[i]!;
    out.push({
      key: g.taskId,
      value: encodeGroup({
        eventId: eventIds.rolloutGroupScored(campaignId, step, batchId, g.taskId),
        campaignId,
        taskId: g.taskId,
        step,
        policyVersion,
        rewards: hasNegativeZero(g.rewards) ? g.rewards.map((r) => r + 0) : g.rewards,
        producedAt: receivedAt,
      }),
    });
  }
  return out;
}

/** The StepClosed record a closing batch ends with, declaring the step's total group count. */
export function stepClosedRecord(
  body: Pick<RolloutBatchBody, 'campaignId' | 'step' | 'receivedAt'>,
  stepGroups: number,
): OutgoingRecord {
  return {
    key: `${body.campaignId}/step-close`,
    value: encode('StepClosed', {
      eventId: eventIds.stepClosed(body.campaignId, body.step),
      campaignId: body.campaignId,
      step: body.step,
      groupCount: stepGroups,
      producedAt: body.receivedAt,
    }),
  };
}

/**
 * Every record of a batch: its groups, then (when it closes its step) the StepClosed. The gateway
 * and the activity both send exactly these, so whichever publishes, the records are the same.
 */
export function rolloutBatchRecords(body: RolloutBatchBody, stepGroups: number | null): OutgoingRecord[] {
  const records = rolloutGroupRecords(body);
  if (body.close) records.push(stepClosedRecord(body, stepGroups!));
  return records;
}
