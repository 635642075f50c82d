// Records that declare more than they hold: an Avro array, map or string whose count or length,
// written before its items, says 2^31 - 1 while a few bytes follow. Each is a valid frame of a
// registered schema up to that count, so only a reader that checks declared lengths against the
// bytes left (platform/codec/bounded.ts) refuses it before allocating. Used by the tests and the soak's
// bomb fault; never by the product.
import { encode } from '../../../platform/codec/registry.js';

/** Zig-zag varint of a non-negative count or length, as Avro writes it. */
export function varint(n: number): number[] {
  let v = n * 2;
  const out: number[] = [];
  while (v >= 128) {
    out.push((v % 128) | 0x80);
    v = Math.floor(v / 128);
  }
  out.push(v);
  return out;
}

/** `bytes` with the varint at `at` (the given bytes of it) replaced by `count`. */
function declare(bytes: Buffer, marker: Buffer, markerVarintBytes: number, count: number): Buffer {
  const at = bytes.indexOf(marker);
  if (at < 0) throw new Error('bomb marker not found in the encoded record');
  return Buffer.concat([
    bytes.subarray(0, at),
    Buffer.from(varint(count)),
    bytes.subarray(at + markerVarintBytes),
  ]);
}

export interface BombTarget {
  campaignId: string;
  taskId: string;
  eventId: string;
  step?: number;
}

/** A well-formed RolloutGroupScored for the target, the body a bomb is cut from. */
function scored(t: BombTarget, policyVersion: string, rewards: number[]): Buffer {
  return encode('RolloutGroupScored', {
    eventId: t.eventId,
    campaignId: t.campaignId,
    taskId: t.taskId,
    step: t.step ?? 1,
    policyVersion,
    rewards,
    producedAt: 1,
  });
}

/** A RolloutGroupScored whose `rewards` array declares `count` items and holds one. */
export function rewardsArrayBomb(t: BombTarget, count = 2 ** 31 - 1): Buffer {
  const bytes = scored(t, 'p1', [0.25]);
  // The block: count 1 (0x02), the double, the end-of-array 0.
  const block = Buffer.concat([
    Buffer.from([0x02]),
    Buffer.from(new Float64Array([0.25]).buffer),
    Buffer.from([0]),
  ]);
  return declare(bytes, block, 1, count);
}

const POLICY = 'bomb-policy-version-00';

/** A RolloutGroupScored whose `policyVersion` string declares `length` bytes. */
export function stringBomb(t: BombTarget, length = 2 ** 31 - 1): Buffer {
  const bytes = scored(t, POLICY, [0.25, 0.5]);
  const marker = Buffer.concat([Buffer.from(varint(POLICY.length)), Buffer.from(POLICY)]);
  return declare(bytes, marker, varint(POLICY.length).length, length);
}

const JUDGE = 'bomb-judge-score-key';

/** A CandidateValidated (a map-carrying schema) whose `judgeScores` map declares `count` entries. */
export function mapBomb(t: BombTarget, count = 2 ** 31 - 1): Buffer {
  const bytes = encode('CandidateValidated', {
    eventId: t.eventId,
    campaignId: t.campaignId,
    synthesisId: 'bomb',
    candidateId: 'bomb',
    seedTaskId: t.taskId,
    category: 'bomb',
    candidate: '{}',
    candidateHash: '0',
    judgeModel: null,
    judgeScores: { [JUDGE]: 1 },
    refined: false,
    occurredAt: 1,
  });
  const marker = Buffer.concat([Buffer.from([0x02]), Buffer.from(varint(JUDGE.length)), Buffer.from(JUDGE)]);
  return declare(bytes, marker, 1, count);
}
