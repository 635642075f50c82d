// One connected idempotent producer shared by every send of a process (the worker's ingestion
// activities): opening a producer costs a connection, a metadata round trip and an
// InitProducerId, more than publishing a whole 800-group batch. A send that fails drops the
// producer, so the next attempt (the activity's retry) starts from a fresh connection.
import type { KafkaClient, OutgoingRecord, ProducerOptions, RecordProducer } from './port.js';

export class SharedProducer {
  private current: Promise<RecordProducer> | null = null;
  private closed = false;

  constructor(
    private readonly open: () => KafkaClient,
    private readonly opts: ProducerOptions = { idempotent: true },
  ) {}

  /** Sends the records in chunks of at most `chunk`, in order. */
  async send(topic: string, records: OutgoingRecord[], chunk = 2000): Promise<void> {
    if (this.closed) throw new Error('the shared producer is closed');
    const p = this.producer();
    try {
      const producer = await p;
      for (let i = 0; i < records.length; i += chunk) await producer.send(topic, records.slice(i, i + chunk));
    } catch (e) {
      await this.drop(p);
      throw e;
    }
  }

  /** Connects ahead of the first send; a failed connect is only retried by the next send. */
  async warm(): Promise<void> {
    if (!this.closed) await this.producer().catch(() => {});
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

  private async drop(p: Promise<RecordProducer>): Promise<void> {
    if (this.current === p) this.current = null;
    await p.then((x) => x.disconnect()).catch(() => {});
  }
}
