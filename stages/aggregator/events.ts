// The events the aggregator appends to the event store (the outbox relay publishes them): one
// StepStatsRecorded per campaign and step a batch applied groups of, carrying the statistics of
// every task that step changed (band changes included), on the partition's stats stream
// (streams.stats); StepAggregated when a step closes. Recording per step, not per group, keeps the
// log growing with steps and tasks: an 800-task step adds about six events (one per partition),
// where it used to add 800 TaskStatsUpdated and a TaskBandChanged per change.
// Their ids derive from what they record (a task's group count only grows), so a batch applied
// again after a crash appends events the store recognises as the same.
import type pg from 'pg';
import { eventIds, streams } from '../../domain/ids.js';
import { bandSummary, type StepTally } from '../../domain/step-tally.js';
import { stepStatsColumns } from '../../domain/task-stats.js';
import type { SchemaRegistry } from '../../platform/codec/registry.js';
import { append, type NewEvent, typedEvent } from '../../platform/store/events/event-store.js';
import type { StepEntry } from './fold.js';

const PRODUCER = 'rods-aggregator';

/**
 * The most tasks one StepStatsRecorded carries (about 100 KB of JSON): a step with more tasks on
 * one partition is recorded in several events, so no event outgrows a Kafka record.
 */
export const MAX_TASKS_PER_RECORD = 2000;

/** A batch's events per campaign: one StepStatsRecorded per step (in step order) and chunk of tasks. */
export function statsEvents(
  registry: SchemaRegistry,
  entries: readonly StepEntry[],
  now: () => number,
): Map<string, NewEvent[]> {
  const bySteps = new Map<string, Map<number, StepEntry[]>>();
  for (const e of entries) {
    const steps = bySteps.get(e.campaignId) ?? new Map<number, StepEntry[]>();
    const list = steps.get(e.step) ?? [];
    list.push(e);
    steps.set(e.step, list);
    bySteps.set(e.campaignId, steps);
  }
  const events = new Map<string, NewEvent[]>();
  for (const [campaignId, steps] of bySteps) {
    const list: NewEvent[] = [];
    for (const step of [...steps.keys()].sort((a, b) => a - b)) {
      const all = steps.get(step)!;
      for (let i = 0; i < all.length; i += MAX_TASKS_PER_RECORD) {
        const chunk = all.slice(i, i + MAX_TASKS_PER_RECORD);
        const first = chunk[0]!;
        list.push(
          typedEvent(
            'StepStatsRecorded',
            {
              eventId: eventIds.stepStatsRecorded(campaignId, step, first.taskId, first.state.groups),
              campaignId,
              step,
              groups: chunk.reduce((a, e) => a + e.groups, 0),
              tasks: stepStatsColumns(chunk),
              occurredAt: now(),
            },
            { producer: PRODUCER },
            registry,
          ),
        );
      }
    }
    events.set(campaignId, list);
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
  closedBy?: string,
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
    closedBy ? { producer: PRODUCER, closedBy } : { producer: PRODUCER },
    registry,
  );
}
