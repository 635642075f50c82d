// An operator moves a partition past the record at its head, with a reason: the record goes to
// the dead-letter topic (operator-skipped, its original bytes kept), a DeadLettered event is
// appended to the event store, its group (when it decodes) counts as rejected for its step so the
// step can still close, and the stored next offset passes it, in one transaction under the
// partition's lock. Never by an UPDATE of aggregator_offsets by hand.
import type pg from 'pg';
import { eventIds } from '../../domain/ids.js';
import { defaultRegistry } from '../../platform/codec/registry.js';
import { readRecordAt } from '../../platform/kafka/client.js';
import { deadLetter, decodeOrReason, type Sender } from '../../platform/kafka/dlq.js';
import { clearRecordFailuresUpTo } from '../../platform/store/aggregator/failures.js';
import { lockPartition, storedNextOffset, storeNextOffset } from '../../platform/store/aggregator/offsets.js';
import { isRegistered } from '../../platform/store/campaigns.js';
import { inTransaction } from '../../platform/store/db.js';
import { append, typedEvent } from '../../platform/store/events/event-store.js';
import { recordStepProgress } from '../../platform/store/steps/progress.js';
import { StepTallies } from './step-progress.js';

export class SkipRefused extends Error {
  override name = 'SkipRefused';
}

export interface SkipResult {
  topic: string;
  partition: number;
  offset: string;
  nextOffset: string;
  eventId: string;
  /** The group's campaign and step, when the record decoded as one. */
  group: { campaignId: string; step: number; taskId: string } | null;
  bytes: number;
}

/** The event-store stream of the operator's moves past records of one partition. */
export const skipStream = (groupId: string, topic: string, partition: number) =>
  `skips:${groupId}:${topic}:${partition}`;

export async function skipRecord(
  pool: pg.Pool,
  producer: Sender,
  opts: { groupId: string; topic: string; partition: number; offset: string; reason: string; actor?: string },
): Promise<SkipResult> {
  const { groupId, topic, partition, offset } = opts;
  if (!/^\d+$/.test(offset))
    throw new SkipRefused(`--offset must be a record offset (digits), got ${offset}`);
  if (!opts.reason.trim()) throw new SkipRefused('--reason must say why the record is passed over');
  const record = await readRecordAt(topic, partition, offset);
  if (!record)
    throw new SkipRefused(
      `partition ${partition} of ${topic} has no record at offset ${offset} (retention? a wrong partition?)`,
    );
  const registry = defaultRegistry();
  const reason = `${opts.reason} (skipped by ${opts.actor ?? 'an operator'})`;
  return inTransaction(pool, async (tx) => {
    await lockPartition(tx, groupId, topic, partition);
    const head = await storedNextOffset(tx, groupId, topic, partition);
    if (head !== Number(offset))
      throw new SkipRefused(
        `offset ${offset} is not at the head of partition ${partition} of ${topic} for group ${groupId} (its next offset is ${head < 0 ? '(none stored)' : head}): only the record a partition waits on can be skipped`,
      );
    let group: SkipResult['group'] = null;
    const decoded = decodeOrReason(
      { topic, partition, message: record },
      { registry, accept: ['RolloutGroupScored', 'StepClosed'] },
    );
    if ('decoded' in decoded && decoded.decoded.name === 'RolloutGroupScored') {
      const p = decoded.decoded.payload as { campaignId: string; step: number; taskId: string };
      group = { campaignId: p.campaignId, step: Number(p.step), taskId: p.taskId };
      if (await isRegistered(tx, p.campaignId)) {
        const tallies = new StepTallies();
        tallies.rejected(p.campaignId, Number(p.step));
        await recordStepProgress(tx, topic, partition, tallies.all());
      }
    }
    const eventId = eventIds.deadLettered(topic, partition, offset, 'operator-skipped');
    await append(tx, skipStream(groupId, topic, partition), 'any', [
      typedEvent(
        'DeadLettered',
        {
          eventId,
          reasonCode: 'operator-skipped',
          reason,
          sourceTopic: topic,
          partition,
          offset: Number(offset),
          key: record.key,
          value: record.value,
          occurredAt: Date.now(),
        },
        { producer: 'rods-partitions', actor: opts.actor ?? null },
        registry,
      ),
    ]);
    const nextOffset = String(Number(offset) + 1);
    await storeNextOffset(tx, groupId, topic, partition, nextOffset);
    await clearRecordFailuresUpTo(tx, { groupId, topic, partition }, offset);
    // Dead letter before the commit: a crash in between sends it again with the same id.
    await deadLetter(
      producer,
      { topic, partition, offset, code: 'operator-skipped', reason, key: record.key, value: record.value },
      { registry },
    );
    return { topic, partition, offset, nextOffset, eventId, group, bytes: record.value?.length ?? 0 };
  });
}
