// Where the relay keeps its cursor: the metadata of the offset its transactions commit for
// group rods-relay-<name> on rods.relay-checkpoints.v1, written in the same Kafka transaction
// as the records it relays (stages/relay/relay.ts). Status and tests read it here.
import type { Cursor } from '../store/events/event-store.js';
import { START } from '../store/events/event-store.js';
import type { TopicAdmin } from './client.js';
import { RELAY_CHECKPOINT_TOPIC } from './topology.js';

/** The consumer group whose committed offset metadata holds the relay's cursor. */
export function relayGroup(name: string): string {
  return `rods-relay-${name}`;
}

/** The cursor the relay named `name` has committed to Kafka (START if it never ran). */
export async function relayCheckpoint(admin: TopicAdmin, name = 'main'): Promise<Cursor> {
  const offsets = await admin.fetchCommittedOffsets(relayGroup(name), RELAY_CHECKPOINT_TOPIC);
  const p = offsets.find((x) => x.partition === 0);
  if (!p || p.offset === null || !p.metadata) return { ...START };
  const c = JSON.parse(p.metadata) as Cursor;
  if (typeof c.transactionId !== 'string' || typeof c.position !== 'number') {
    throw new Error(`relay ${name}: unreadable checkpoint metadata ${p.metadata}`);
  }
  return c;
}
