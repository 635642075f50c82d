// What the aggregator reads from a record: a reward group, a step closing, or the dead-letter note
// that says why the record cannot be read (stages/aggregator/decode.ts makes them from bytes).

/** What the aggregator needs of a consumed record. */
export interface RewardRecord {
  offset: string;
  key: Buffer | null;
  value: Buffer | null;
}

export interface DeadLetterNote {
  offset: string;
  code: string;
  reason: string;
  key: Buffer | null;
  value: Buffer | null;
}

/** A RolloutGroupScored, with the bytes it came in (a later rejection dead-letters them). */
export interface Group {
  offset: string;
  /** Lower-cased: the dedupe window compares ids as stored (uuid). */
  eventId: string;
  campaignId: string;
  taskId: string;
  step: number;
  rewards: number[];
  policyVersion: string;
  key: Buffer | null;
  value: Buffer | null;
}

/** A StepClosed: the number of groups the trainer declared for the step. */
export interface Closing {
  offset: string;
  campaignId: string;
  step: number;
  groupCount: number;
  key: Buffer | null;
  value: Buffer | null;
}

export interface DecodedBatch {
  groups: Group[];
  closings: Closing[];
  dead: DeadLetterNote[];
}

export function deadLetterNote(
  r: Pick<RewardRecord, 'offset' | 'key' | 'value'>,
  code: string,
  reason: string,
): DeadLetterNote {
  return { offset: r.offset, code, reason, key: r.key, value: r.value };
}
