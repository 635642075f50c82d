// The gateway's direct publish: once a new batch is committed (claim check and ingestion_batches
// row), the gateway sends its records itself, the same records with the same event ids and
// producedAt the ingestion workflow would send (activities/ingestion.ts rolloutBatchRecords),
// then marks the batch published. A step then reaches the topic without the workflow's round
// trips through Temporal and a worker. The ingestion workflow is the fallback: the gateway starts
// it when the send fails or times out, and the reconciler (entry/gateway/reconcile.ts) starts it for a
// batch the gateway died before publishing or marking. A batch sent twice that way (a send cut
// short, a mark lost) carries the same event ids, so the aggregator counts each group once.
import { setImmediate as yieldToIo } from 'node:timers/promises';
import type pg from 'pg';
import type { OutgoingRecord } from '../../platform/kafka/port.js';
import {
  type RolloutBatchBody,
  rolloutGroupRecords,
  stepClosedRecord,
} from '../../platform/kafka/rollout-records.js';
import { markPublished } from '../../platform/store/steps/batches.js';
import type { Accepted } from './ingest.js';

export const DEFAULT_DIRECT_PUBLISH_TIMEOUT_MS = 5000;
/** Groups encoded between two yields to the event loop. */
const SLICE = 64;

/** What the publisher sends with: the process's shared producer (platform/kafka/shared-producer.ts) fits. */
export interface BatchSender {
  send(topic: string, records: OutgoingRecord[], chunk?: number): Promise<void>;
}

export interface DirectPublishLog {
  warn(obj: object, msg: string): void;
}

export interface DirectPublisherOptions {
  db: pg.Pool;
  producer: BatchSender;
  /** The rewards topic. */
  topic: string;
  /** How long a send may take before the batch is left to its ingestion workflow (default 5 s). */
  timeoutMs?: number;
}

export class DirectPublisher {
  private readonly timeoutMs: number;

  constructor(private readonly opts: DirectPublisherOptions) {
    this.timeoutMs = opts.timeoutMs ?? DEFAULT_DIRECT_PUBLISH_TIMEOUT_MS;
  }

  /**
   * The RolloutGroupScored records of a batch about to be accepted, encoded a slice at a time
   * with a yield to the event loop in between, so the acceptance's transaction (round trips to
   * PostgreSQL, the commit's WAL flush) proceeds meanwhile instead of before or after.
   */
  async encodeGroups(body: Omit<RolloutBatchBody, 'close'>): Promise<OutgoingRecord[]> {
    const out: OutgoingRecord[] = [];
    for (let i = 0; i < body.groups.length; i += SLICE) {
      if (i > 0) await yieldToIo();
      rolloutGroupRecords(body, i, Math.min(i + SLICE, body.groups.length), out);
    }
    return out;
  }

  /**
   * Publishes a batch acceptBatch has just committed, with its group records when encodeGroups
   * made them from the same batch and receivedAt. True once its records are on the topic
   * (acknowledged by every in-sync replica); false when the send failed or timed out, and the
   * caller starts its ingestion workflow instead (a send still running then is harmless).
   */
  async publish(
    accepted: Accepted,
    groupRecords?: OutgoingRecord[],
    log?: DirectPublishLog,
  ): Promise<boolean> {
    const body = accepted.body;
    if (!body) return false;
    let sent: Promise<void>;
    try {
      const records = groupRecords ?? rolloutGroupRecords(body);
      if (body.close) records.push(stepClosedRecord(body, accepted.stepGroups!));
      sent = this.opts.producer.send(this.opts.topic, records);
    } catch (e) {
      sent = Promise.reject(e);
    }
    let timer: NodeJS.Timeout | undefined;
    const timedOut = new Promise<'timeout'>((resolve) => {
      timer = setTimeout(() => resolve('timeout'), this.timeoutMs);
      timer.unref?.();
    });
    try {
      if ((await Promise.race([sent, timedOut])) === 'timeout') {
        sent.catch(() => {});
        log?.warn(
          { batchId: body.batchId, step: body.step, timeoutMs: this.timeoutMs },
          'direct publish timed out: the ingestion workflow publishes the batch',
        );
        return false;
      }
    } catch (e) {
      log?.warn(
        { batchId: body.batchId, step: body.step, err: (e as Error).message },
        'direct publish failed: the ingestion workflow publishes the batch',
      );
      return false;
    } finally {
      clearTimeout(timer);
    }
    try {
      await markPublished(this.opts.db, body, accepted.stepGroups, { asyncCommit: true });
    } catch (e) {
      // The records are on the topic; the reconciler publishes the batch again and marks it.
      log?.warn(
        { batchId: body.batchId, step: body.step, err: (e as Error).message },
        'batch published but not marked: the reconciler will publish it again (deduplicated)',
      );
    }
    return true;
  }
}
