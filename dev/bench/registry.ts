// One line per benchmark: name, what it measures, and its module (loaded on demand).
import type { BenchEntry } from './result.js';

export const BENCHES: Record<string, BenchEntry> = {};

function registerBench(name: string, describe: string, load: BenchEntry['load']): void {
  BENCHES[name] = { describe, load };
}

registerBench(
  'kafka-produce',
  'produce keyed messages with the idempotent producer vs. a fire-and-forget producer',
  async () => (await import('./kafka-produce.js')).default,
);
registerBench(
  'event-store',
  'append N events through the store and read them back by global position vs. raw COPY',
  async () => (await import('./event-store.js')).default,
);
registerBench(
  'aggregator',
  'exactly-once aggregator over N reward groups vs. a plain consumer that only decodes the same topic',
  async () => (await import('./aggregator.js')).default,
);
registerBench(
  'aggregator-steps',
  'live-sized batches (one group per task per batch): a step applied with the task cache vs. reading every task in full',
  async () => (await import('./aggregator-steps.js')).default,
);
registerBench(
  'loop-latency',
  'step watermark to TaskInjected for 50 candidates (zero-latency stand-in) vs. a bare one-activity workflow',
  async () => (await import('./loop-latency.js')).default,
);
registerBench(
  'ingest',
  'steps of 800 tasks x 16 rewards through the gateway and the ingestion workflow vs. producing the same records to Kafka',
  async () => (await import('./ingest.js')).default,
);
registerBench(
  'replay',
  'fold a recorded history of 1,000,000 reward groups read back from Kafka with the live statistics code vs. a plain read of the same records',
  async () => (await import('./replay.js')).default,
);
registerBench(
  'scale',
  'a 10,000-step campaign (800 tasks x 16 rollouts): aggregator RSS and per-step cost early vs. late, event-store bytes per step, full-size replay vs. a plain read, workflow history per continue-as-new run',
  async () => (await import('./scale.js')).default,
);
registerBench(
  'isolation',
  "a burst of 5,000 records of one campaign that the store refuses, ahead of another campaign's step on one partition: time to that step closed vs. the same burst with nothing refused",
  async () => (await import('./isolation.js')).default,
);
