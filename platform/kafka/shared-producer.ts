// One connected idempotent producer shared by every send of a process (the worker's ingestion
// activities): opening a producer costs a connection, a metadata round trip and an
// InitProducerId, more than publishing a whole 800-group batch. A send that fails drops the
// producer, so the next attempt (the activity's retry) starts from a fresh connection.
//
// Nothing here waits without bound: a connect that has not finished after `connectTimeoutMs`
// (seen in the chaos soak: an InitProducerId during a controller election that never answered)
// fails the send and is abandoned, so the activity's retry opens a new producer instead of
// awaiting the same stuck one for ever; a disconnect is waited for at most `disconnectTimeoutMs`.
import type { KafkaClient, OutgoingRecord, ProducerOptions, RecordProducer } from './port.js';

export interface SharedProducerTimeouts {
  connectTimeoutMs?: number;
  disconnectTimeoutMs?: number;
}

export class SharedProducer {
  private current: Promise<RecordProducer> | null = null;
  private closed = false;
  private readonly connectTimeoutMs: number;
  private readonly disconnectTimeoutMs: number;

  constructor(
    private readonly open: () => KafkaClient,
    private readonly opts: ProducerOptions = { idempotent: true },
    timeouts: SharedProducerTimeouts = {},
  ) {
    this.connectTimeoutMs = timeouts.connectTimeoutMs ?? 60_000;
    this.disconnectTimeoutMs = timeouts.disconnectTimeoutMs ?? 5_000;
  }

  /** Sends the records in chunks of at most `chunk`, in order. */
  async send(topic: string, records: OutgoingRecord[], chunk = 2000): Promise<void> {
    if (this.closed) throw new Error('the shared producer is closed');
    const p = this.producer();
    try {
      const producer = await this.connected(p);
      for (let i = 0; i < records.length; i += chunk) await producer.send(topic, records.slice(i, i + chunk));
    } catch (e) {
      await this.drop(p);
      throw e;
    }
  }

  /** Connects ahead of the first send; a failed connect is only retried by the next send. */
  async warm(): Promise<void> {
    if (!this.closed) await this.connected(this.producer()).catch(() => {});
  }

  async close(): Promise<void> {
    this.closed = true;
    if (this.current) await this.drop(this.current);
  }

  private producer(): Promise<RecordProducer> {
    if (!this.current) {
      const opened = this.open().producer(this.opts);
      this.current = opened;
      // a failed connect is not kept: the next send tries again
      opened.catch(() => {
        if (this.current === opened) this.current = null;
      });
    }
    return this.current;
  }

  /** The producer once connected, or a rejection after connectTimeoutMs. */
  private connected(p: Promise<RecordProducer>): Promise<RecordProducer> {
    let timer: NodeJS.Timeout | undefined;
    const late = new Promise<never>((_, reject) => {
      timer = setTimeout(
        () =>
          reject(
            new Error(
              `the Kafka producer did not connect within ${this.connectTimeoutMs} ms; the next attempt opens a new one`,
            ),
          ),
        this.connectTimeoutMs,
      );
    });
    return Promise.race([p, late]).finally(() => clearTimeout(timer));
  }

  /** Forgets the producer and disconnects it (once connected, if it ever is), waiting a bounded time. */
  private async drop(p: Promise<RecordProducer>): Promise<void> {
    if (this.current === p) this.current = null;
    const disconnected = p.then((x) => x.disconnect()).catch(() => {});
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([
      disconnected,
      new Promise<void>((resolve) => {
        timer = setTimeout(resolve, this.disconnectTimeoutMs);
      }),
    ]).finally(() => clearTimeout(timer));
  }
}
