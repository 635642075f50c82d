// The events the aggregator appends to the event store (the outbox relay publishes them):
// TaskBandChanged for every band change and TaskStatsUpdated for the latest statistics of each
// task a batch touched, on the partition's stats stream (streams.stats); StepAggregated when a step closes.
// Their ids derive from the source event (or the step), so a batch applied again after a crash
// appends events the store recognises as the same.
import type pg from 'pg';
import { eventIds, streams } from '../../domain/ids.js';
import { bandSummary, type StepTally } from '../../domain/step-tally.js';
import { statsRecord } from '../../domain/task-stats.js';
import type { SchemaRegistry } from '../../platform/codec/registry.js';
import { append, type NewEvent, typedEvent } from '../../platform/store/events/event-store.js';
import type { EventPayloads } from '../../schemas/types.generated.js';
import type { Folded } from './fold.js';

const PRODUCER = 'rods-aggregator';

/** A batch's events per campaign: band changes in the order applied, then one TaskStatsUpdated per task touched. */
export function statsEvents(
  registry: SchemaRegistry,
  folded: Pick<Folded, 'bandChanges' | 'touched'>,
  now: () => number,
): Map<string, NewEvent[]> {
  const events = new Map<string, NewEvent[]>();
  const emit = <N extends 'TaskBandChanged' | 'TaskStatsUpdated'>(
    campaignId: string,
    type: N,
    payload: EventPayloads[N],
  ) => {
    const list = events.get(campaignId) ?? [];
    // A statistics update names the group it follows (a band change carries no such id).
    const causationId = 'sourceEventId' in payload ? payload.sourceEventId : undefined;
    list.push(typedEvent(type, payload, { producer: PRODUCER, causationId }, registry));
    events.set(campaignId, list);
  };
  for (const c of folded.bandChanges) {
    emit(c.campaignId, 'TaskBandChanged', {
      eventId: eventIds.taskBandChanged(c.campaignId, c.sourceEventId),
      campaignId: c.campaignId,
      taskId: c.taskId,
      from: c.from,
      to: c.to,
      step: c.step,
      stats: statsRecord(c.state),
      occurredAt: now(),
    });
  }
  // The latest statistics of each task touched (coalesced per batch: the topic is compacted).
  for (const t of folded.touched) {
    emit(t.campaignId, 'TaskStatsUpdated', {
      eventId: eventIds.taskStatsUpdated(t.campaignId, t.lastEventId),
      campaignId: t.campaignId,
      taskId: t.taskId,
      stats: statsRecord(t.state),
      sourceEventId: t.lastEventId,
      occurredAt: now(),
    });
  }
  return events;
}

/** Appends each campaign's events to its stats stream for this partition; returns how many. */
export async function appendStatsEvents(
  client: pg.PoolClient,
  topic: string,
  partition: number,
  events: ReadonlyMap<string, NewEvent[]>,
): Promise<number> {
  let count = 0;
  for (const [campaignId, list] of events) {
    await append(client, streams.stats(campaignId, topic, partition), 'any', list);
    count += list.length;
  }
  return count;
}

/** StepAggregated: the closed step's group count and its band summaries. */
export function stepAggregated(
  registry: SchemaRegistry,
  campaignId: string,
  step: number,
  tally: StepTally,
  now: () => number,
): NewEvent {
  return typedEvent(
    'StepAggregated',
    {
      eventId: eventIds.stepAggregated(campaignId, step),
      campaignId,
      step,
      groupCount: tally.groups,
      hard: bandSummary(tally.hard),
      boundary: bandSummary(tally.boundary),
      mastered: bandSummary(tally.mastered),
      occurredAt: now(),
    },
    { producer: PRODUCER },
    registry,
  );
}
