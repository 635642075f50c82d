// The shape of `rods campaign status C --json` and of `holds`/`worker` in the gateway's
// `GET /v1/campaigns/:id` (documented in analysis/status/README.md). Fields are only ever added; a part
// that could not be read is null with its reason in `errors`.

import type { CampaignStatus } from '../../domain/campaign-state.js';
import type { CheckpointWait } from '../../platform/store/checkpoints/waits.js';
import type { PoolView } from '../../platform/store/pool/view.js';
import type { StepRefusal } from '../../platform/store/steps/refusals.js';

export const STATUS_FORMAT = 'rods.campaign-status/1';

/** What the oldest open step waits for (analysis/status/README.md lists each). */
export type WaitingFor =
  | 'trainer-batches'
  | 'trainer-close'
  | 'unpublished-batches'
  | 'aggregator-declare'
  | 'aggregator-groups'
  | 'aggregator-close';

export interface SynthesisView {
  synthesisId: string;
  seedTaskId: string;
  step: number;
  selectedAt: string;
  /** When SynthesisStarted was recorded (null: the child never got that far). */
  startedAt: string | null;
  /** Seconds since it was selected. */
  runningS: number;
}

export interface WorkerView {
  /** A worker polled the campaign's task queue recently (or answered the status query). */
  present: boolean;
  taskQueue: string | null;
  /** Pollers the server saw on the task queue, with seconds since their last poll. */
  pollers: { identity: string; lastPollAgoS: number | null }[];
  /** The workflow answered the status query. */
  answered: boolean;
  detail: string;
}

export interface ExecutionView {
  workflowId: string;
  runId: string;
  /** Temporal's execution status: RUNNING, COMPLETED, TERMINATED, FAILED, ... */
  status: string;
  taskQueue: string;
  historyLength: number;
  startTime: string | null;
  closeTime: string | null;
}

export interface OldestOpenStep {
  step: number;
  /** Groups the trainer's closing batch declared (StepClosed), null until the aggregator read it. */
  declaredGroups: number | null;
  /** Groups the aggregator accounted for the step: applied + rejected (dead-lettered). */
  countedGroups: number;
  appliedGroups: number;
  rejectedGroups: number;
  /** declaredGroups - countedGroups (null while undeclared). */
  missingGroups: number | null;
  batches: { accepted: number; published: number; closingReceived: boolean };
  unpublishedBatches: { batchId: string; groups: number; closes: boolean; acceptedAt: string }[];
  waitingFor: WaitingFor[];
}

export interface RelayLag {
  name: string;
  /** The relay's committed cursor; null when it never committed one. */
  checkpoint: { transactionId: string; position: number } | null;
  /** Events in the store after the checkpoint (at most `cap`; `capped` when there are more). */
  unpublishedEvents: number;
  unpublishedCampaignEvents: number;
  capped: boolean;
  oldestUnpublishedAt: string | null;
}

export interface AggregatorPartitionLag {
  partition: number;
  highWatermark: number;
  /** Next offset stored in PostgreSQL with the statistics (the authority), null if none. */
  storedOffset: number | null;
  /** Next offset committed to the Kafka consumer group (a hint), null if none. */
  committedOffset: number | null;
  /** Records not yet applied: highWatermark - (storedOffset ?? committedOffset ?? low). */
  lag: number;
}

export interface AggregatorLag {
  groupId: string;
  topic: string;
  totalLag: number;
  partitions: AggregatorPartitionLag[];
}

export interface DeadLetters {
  /** Counted from this time on: when the last step closed (or the campaign's first batch). */
  since: string | null;
  /** Dead letters of this campaign's records, by reason code. */
  total: number;
  byReason: Record<string, number>;
  /** Dead letters since then whose record names no campaign (undecodable bytes), by reason code. */
  unattributed: Record<string, number>;
  /** Records of the dead-letter topic read (only the newest `window` per partition are read). */
  scanned: number;
  /** True when older records of the window's partitions were not read. */
  truncated: boolean;
}

/** The step the campaign waits for when it never closed while later steps did, or its closing batch was refused. */
export interface MissingStepView {
  step: number;
  laterClosed: number;
  laterFrom: number;
  laterTo: number;
  /** Batches the gateway accepted for it (none closing it) and their groups. */
  received: { batches: number; groups: number };
  /** The last refusal of its closing batch (platform/store/steps/refusals.ts), if any. */
  refusal: StepRefusal | null;
  /** The campaign's ingestion.missingSteps. */
  policy: 'move-on' | 'wait';
  afterSteps: number;
  /** The same in words. */
  detail: string;
}

export type { CheckpointWait };

export interface Holds {
  lastClosedStep: number;
  lastClosedAt: string | null;
  lastPlannedStep: number;
  /** The oldest step not closed, null when every step the trainer sent is closed. */
  oldestOpenStep: OldestOpenStep | null;
  /** Closed steps the campaign has not planned yet (the workflow is behind: no worker?). */
  closedNotPlanned: number;
  /** The next step to plan, when it never closed while later ones did; null otherwise. */
  missingStep: MissingStepView | null;
  /**
   * Checkpoints the gateway answered 503 checkpoint-ahead and has not recorded since: the step
   * each waits for and why (refused, missing, not reported, still counting), oldest step first.
   */
  checkpointsWaiting: CheckpointWait[];
  /**
   * Partitions of the aggregators' group held on the record at their head (a range a process died
   * in or hangs on, or a record that keeps failing), shared by every campaign on them.
   */
  stuckPartitions: { topic: string; partition: number; offset: number; reason: string; since: string }[];
  /**
   * The campaign's records set aside because some failed to fold (platform/store/aggregator/park.ts): its steps
   * wait for them while the aggregator drains them; null when none.
   */
  parked: {
    records: number;
    partitions: number;
    oldestParkedAt: string | null;
    reason: string | null;
  } | null;
  unpublishedBatches: { count: number; groups: number; oldestAcceptedAt: string | null };
  /** Syntheses without an outcome, and those running longer than `synthesisTimeoutS`. */
  runningSyntheses: number;
  synthesisTimeoutS: number;
  overdueSyntheses: SynthesisView[];
  relay: RelayLag | null;
  aggregator: AggregatorLag | null;
  deadLetters: DeadLetters | null;
}

export interface CampaignStatusReport {
  format: typeof STATUS_FORMAT;
  campaignId: string;
  name: string;
  checkedAt: string;
  /** running, paused, seeding, stopped (workflow); completed, terminated, failed, ... (closed
   * execution); no-workflow; or the registry's status when the workflow did not answer. */
  status: string;
  /** Where `status`, `step` and `poolVersion` come from. */
  source: 'workflow' | 'workflow-result' | 'projections';
  /** Last planned step. */
  step: number;
  poolVersion: number;
  worker: WorkerView;
  execution: ExecutionView | null;
  /** The workflow's own status (its query, or its result once completed); null otherwise. */
  workflow: CampaignStatus | null;
  pool: PoolView;
  /** null when not asked for (the gateway's `?holds=false`). */
  holds: Holds | null;
  /** Parts that could not be read: part name -> reason. */
  errors: Record<string, string>;
}
