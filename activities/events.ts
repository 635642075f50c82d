// Building the events activities append: the payload carries its own event id, the schema
// fingerprint comes from the event's current schema, the producer goes into the metadata.
import { defaultRegistry } from '../codec/registry.js';
import type { NewEvent } from '../store/event-store.js';

export function workerEvent(
  type: string,
  eventId: string,
  payload: Record<string, unknown>,
  metadata: Record<string, unknown> = {},
): NewEvent {
  const schema = defaultRegistry().current(type);
  if (!schema) throw new Error(`no schema for event type ${type}`);
  return {
    eventId,
    type,
    fingerprint: schema.fingerprint,
    payload: { eventId, ...payload },
    metadata: { producer: 'rods-worker', ...metadata },
  };
}
