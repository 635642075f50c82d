// One line per benchmark: its name (also its module, ./NAME.ts, loaded on demand) and what it measures.
import type { BenchEntry } from './result.js';

const DESCRIPTIONS: Record<string, string> = {
  'kafka-produce': 'produce keyed messages with the idempotent producer vs. a fire-and-forget producer',
  'kafka-security':
    'produce keyed messages with the idempotent producer over SASL_SSL (SCRAM-SHA-512) and over mutual TLS vs. the same private broker plaintext',
  'event-store': 'append N events through the store and read them back by global position vs. raw COPY',
  aggregator:
    'exactly-once aggregator over N reward groups vs. a plain consumer that only decodes the same topic',
  'aggregator-steps':
    'live-sized batches (one group per task per batch): a step applied with the task cache vs. reading every task in full',
  'loop-latency':
    'step watermark to TaskInjected for 50 candidates (zero-latency stand-in) vs. a bare one-activity workflow',
  ingest:
    'steps of 800 tasks x 16 rewards through the gateway and the ingestion workflow vs. producing the same records to Kafka',
  replay:
    'fold a recorded history of 1,000,000 reward groups read back from Kafka with the live statistics code vs. a plain read of the same records',
  scale:
    'a 10,000-step campaign (800 tasks x 16 rollouts): aggregator RSS and per-step cost early vs. late, event-store bytes per step, full-size replay vs. a plain read, workflow history per continue-as-new run',
  campaigns:
    'twenty campaigns at once through one gateway and aggregator (one stalling mid-step, one followed by a poison flood): per-step close latency p50 and p99 vs. one campaign alone',
  'long-campaign':
    "a 10,000-step, 800-task campaign built through the loop's writers: a planning step, a status call, a dashboard poll, a lineage lookup and a replay resume at step 100 vs. at the last step, and bytes per 1,000 steps of every table",
  checkpoints:
    "a checkpoint recorded at the last of 10,000 steps (800 tasks) vs. at step 100, and a gateway process's peak memory under 16 concurrent reports on a campaign with 12 checkpoints of near 8 MiB each",
  secured:
    "one campaign's live steps of 800 tasks x 16 rewards on a secured stack (Kafka SASL_SSL+SCRAM+ACLs, PostgreSQL verify-full, Temporal mTLS, HTTPS gateway): step close latency and gateway ingest time vs. the plaintext stack in the same run",
  'tool-calls':
    "BFCL episodes played one tool call at a time as the trainer client's environment plays them: executor calls per tool call and tool-call time per episode on executor sessions vs. the same client replaying each history through /execute",
  'trl-example':
    "the TRL example (GRPOTrainer on CPU, BFCL environments as tools) on a live campaign: training steps per minute and executor calls per step with the environments on executor sessions vs. replaying each episode's history (--policy oracle: a policy playing BFCL's ground truth as tool calls)",
  evaluation:
    "N held-out BFCL tasks scored by the evaluation workflow (bfcl-eval's inference and checker in the executor, a verdict event per task) against the stand-in's known-answer policy vs. the same tasks posted straight to the executor: rods' share of an evaluation",
  isolation:
    "a burst of 5,000 records of one campaign that the store refuses, ahead of another campaign's step on one partition: time to that step closed vs. the same burst with nothing refused",
};

export const BENCHES: Record<string, BenchEntry> = Object.fromEntries(
  Object.entries(DESCRIPTIONS).map(([name, describe]) => [
    name,
    { describe, load: async () => (await import(`./${name}.js`)).default },
  ]),
);
