// An event as the store returns it (platform/store/events/event-store.ts reads it, platform/store/events/copy-binary.ts decodes it
// from COPY's binary rows): the fields its hash covers, and where and when it was stored.
import type { HashedFields } from './canonical.js';

export interface EventMetadata {
  correlationId?: string;
  causationId?: string;
  producer?: string;
  [key: string]: unknown;
}

export interface RecordedEvent extends HashedFields {
  position: number;
  /** xid8 of the transaction that wrote it, as a decimal string. */
  transactionId: string;
  metadata: EventMetadata;
  recordedAt: Date;
}
