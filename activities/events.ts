// Building the events activities append: the payload carries its own event id, the schema
// fingerprint comes from the event's current schema, the producer goes into the metadata.

import { type TypedNewEvent, typedEvent } from '../platform/store/events/event-store.js';
import type { EventName, EventPayloads } from '../schemas/types.generated.js';

export function workerEvent<N extends EventName>(
  type: N,
  eventId: string,
  payload: Omit<EventPayloads[N], 'eventId'>,
  metadata: Record<string, unknown> = {},
): TypedNewEvent<N> {
  return typedEvent(type, { eventId, ...payload } as EventPayloads[N] & { eventId: string }, {
    producer: 'rods-worker',
    ...metadata,
  });
}
