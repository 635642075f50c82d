// Every id the system builds from other ids, in one place: event-store stream names and the
// prefixes that select a campaign's streams, Temporal workflow ids, and the name-based ids of
// events (and of the other records an append or a consumer must recognise when re-derived).
// These strings are recorded data (stream names, Temporal histories, idempotent appends,
// consumer dedupe): a builder's output must never change; domain/ids.unit.test.ts pins them.
// Pure and sandbox-safe (SHA-256 from @noble/hashes): workflow code imports it too. Processes
// install node:crypto's SHA-256 at start (platform/util/node-sha256.ts): the same bytes, about 5x faster
// on the aggregator's hot path.

import { utf8Bytes } from './canonical-json.js';
import { sha256Of as digest } from './sha256.js';

export { type Sha256, useSha256 } from './sha256.js';

const HEX = Array.from({ length: 256 }, (_, i) => i.toString(16).padStart(2, '0'));

/**
 * A UUID (version 8, name-based on SHA-256) derived from the parts: the same inputs give the same
 * id, so an event re-derived after a crash or during replay carries the id it had the first time
 * and the store's idempotent append or a consumer's dedupe recognises it. Use the named builders
 * below (eventIds, ...): each id kind's parts are written there once.
 */
export function derivedUuid(...parts: (string | number)[]): string {
  const h = digest(derivationKey(parts));
  h[6] = (h[6]! & 0x0f) | 0x80; // version 8
  h[8] = (h[8]! & 0x3f) | 0x80; // RFC 4122 variant
  let x = '';
  for (let i = 0; i < 16; i++) x += HEX[h[i]!];
  return `${x.slice(0, 8)}-${x.slice(8, 12)}-${x.slice(12, 16)}-${x.slice(16, 20)}-${x.slice(20, 32)}`;
}

/**
 * What derivedUuid hashes: the parts joined by U+001F. A part holding U+001E or U+001F (no id the
 * gateway accepts does) is written as U+001E and its UTF-8 bytes in hex, so distinct part lists
 * never give one key, and every key of parts without them is the one recorded before.
 */
export function derivationKey(parts: readonly (string | number)[]): string {
  return parts
    .map((p) => {
      const s = String(p);
      if (!s.includes('\u001e') && !s.includes('\u001f')) return s;
      let hex = '';
      for (const b of utf8Bytes(s)) hex += HEX[b];
      return `\u001e${hex}`;
    })
    .join('\u001f');
}

// Campaign and batch ids are letters, digits, '.', '_' and '-' (entry/gateway/schemas.ts ID_PATTERN),
// Kafka topics the same: ':' separates such parts injectively, where '-' did not (campaign `a`,
// step 1, batch `2-x` and campaign `a-1`, step 2, batch `x` were one id). The '-' forms stay for
// what was recorded with them (streams and workflow histories of running campaigns).
const synthesisIdPrefix = (campaignId: string) => `synth:${campaignId}:`;
const legacySynthesisIdPrefix = (campaignId: string) => `synth-${campaignId}-`;
const statsPrefix = (campaignId: string) => `stats:${campaignId}:`;
const legacyStatsPrefix = (campaignId: string) => `stats-${campaignId}-`;

/**
 * A synthesis run of a campaign: one per seed selected at a step (also its workflow id). The seed
 * task id comes last, so it may hold any character.
 */
export const synthesisId = (campaignId: string, step: number, seedTaskId: string) =>
  `${synthesisIdPrefix(campaignId)}${step}:${seedTaskId}`;

/** The synthesis id campaigns recorded before ids were made injective (their workflow histories replay it). */
export const legacySynthesisId = (campaignId: string, step: number, seedTaskId: string) =>
  `${legacySynthesisIdPrefix(campaignId)}${step}-${seedTaskId}`;

/**
 * The candidate a synthesis of `seedTaskId` at `step` produces; its task id once injected:
 * `<seed>~s<step>` for a seed, `<root seed>~<parent key>~s<step>` for a generated task, whose id
 * already names a chain. Ids stay bounded at any lineage depth: the legacy form grew by one
 * `~s<step>` a generation (74 generations, 600 characters, in the 10,000-step bench), and every
 * key, record, plan state and workflow id built from a task id grew with it (Temporal refuses
 * workflow ids over 1,000 bytes, about 150 generations).
 */
export const candidateId = (seedTaskId: string, step: number) => `${parentRef(seedTaskId)}~s${step}`;

/** The candidate id synthesis workflows started before bounded ids computed (their histories replay it). */
export const legacyCandidateId = (seedTaskId: string, step: number) => `${seedTaskId}~s${step}`;

/** How a candidate id names its parent: a seed (an id without `~`) by its id, any other task by its root and parentKey. */
export function parentRef(taskId: string): string {
  const cut = taskId.indexOf('~');
  return cut < 0 ? taskId : `${taskId.slice(0, cut)}~${parentKey(taskId)}`;
}

/** 48 bits of SHA-256 of a task id, in hex: what a child's candidate id keeps of a generated parent's id. */
export function parentKey(taskId: string): string {
  const h = digest(`candidate-parent\u001f${taskId}`);
  let x = '';
  for (let i = 0; i < 6; i++) x += HEX[h[i]!];
  return x;
}

/** An Augment variant (miss_func, miss_param) of a candidate: one per kind. */
export const variantCandidateId = (baseCandidateId: string, kind: string) => `${baseCandidateId}~${kind}`;

/**
 * The synthesis id a variant's events are recorded under (its own stream and event ids): its
 * outcome never collides with, or is read as, the outcome of the synthesis run that made it.
 */
export const variantSynthesisId = (synthesisId: string, kind: string) => `${synthesisId}~${kind}`;

/**
 * The id a pool task is delivered under to BFCL harnesses (sink and pool API; the rods id rides
 * along as `rods_task_id`). bfcl-eval reads the test category from the id up to its last `_`,
 * sorts by the integer after it, and names environment instances after the id: a rods id such as
 * `multi_turn_base_2~s6` breaks all three. A seed keeps its BFCL id; any other task gets
 * `multi_turn_<category>_<n>`, n = 1,000,000 + 48 bits of SHA-256 of its rods id (above every
 * BFCL index; two tasks of a pool of 10,000 share an n with probability about 2e-7).
 */
export function bfclTaskId(taskId: string, category: string): string {
  const prefix = `multi_turn_${category}_`;
  if (taskId.startsWith(prefix) && /^\d+$/.test(taskId.slice(prefix.length))) return taskId;
  const h = digest(`bfcl-task-id\u001f${taskId}`);
  let n = 0;
  for (let i = 0; i < 6; i++) n = n * 256 + h[i]!;
  return `${prefix}${1_000_000 + n}`;
}

/** Event-store stream names. */
export const streams = {
  /** A campaign's decisions: seeding, selections, injections, retirements, prunes, lifecycle. */
  campaign: (campaignId: string) => `campaign-${campaignId}`,
  /** One synthesis run: its start, stage completions and outcome. */
  synthesis: (synthesisId: string) => `synthesis-${synthesisId}`,
  /** The aggregator's statistics events of one rewards-topic partition. */
  stats: (campaignId: string, topic: string, partition: number) =>
    `${statsPrefix(campaignId)}${topic}:${partition}`,
  /** The aggregator's closed steps. */
  steps: (campaignId: string) => `steps-${campaignId}`,
  /** The trainer's saved checkpoints (CheckpointSaved), recorded by the gateway. */
  checkpoints: (campaignId: string) => `checkpoints-${campaignId}`,
  /** One evaluation of a checkpoint (domain/evaluation.ts): its start, scored tasks and outcome. */
  evaluation: (evaluationId: string) => `evaluation-${evaluationId}`,
};

/**
 * Stream-name prefixes that together select every stream of a campaign (replay's audit). A prefix
 * also matches the streams of a campaign whose id extends this one (demo-1 and demo-10): the
 * audit then verifies more streams, never fewer.
 */
export function campaignStreamPrefixes(campaignId: string): string[] {
  return [
    streams.campaign(campaignId),
    streams.synthesis(synthesisIdPrefix(campaignId)),
    statsPrefix(campaignId),
    streams.steps(campaignId),
    streams.checkpoints(campaignId),
    // streams named before ids were made injective
    streams.synthesis(legacySynthesisIdPrefix(campaignId)),
    legacyStatsPrefix(campaignId),
  ];
}

/** Temporal workflow ids. */
export const workflowIds = {
  /** The campaign workflow: one per campaign id. */
  campaign: (campaignId: string) => `campaign-${campaignId}`,
  /** A synthesis child workflow: its id is the synthesis id. */
  synthesis: (synthesisId: string) => synthesisId,
  /** One ingestion workflow per accepted rollout batch (recorded in its ingestion_batches row). */
  ingestion: (campaignId: string, step: number, batchId: string) => `ingest:${campaignId}:${step}:${batchId}`,
  /** `rods doctor`'s round trip. */
  doctor: (token: string) => `doctor-${token}`,
  /** One evaluation of a checkpoint: its id is the evaluation's. */
  evaluation: (evaluationId: string) => `evaluation-${evaluationId}`,
};

/** Name-based event ids, one builder per kind of event and producer. */
export const eventIds = {
  // platform/store/campaigns.ts
  campaignStarted: (campaignId: string) => derivedUuid('CampaignStarted', campaignId),
  // the step planner (activities/curriculum.ts)
  taskSeeded: (campaignId: string, taskId: string) => derivedUuid('TaskSeeded', campaignId, taskId),
  taskRetired: (campaignId: string, taskId: string, step: number) =>
    derivedUuid('TaskRetired', campaignId, taskId, step),
  seedSelected: (campaignId: string, taskId: string, step: number) =>
    derivedUuid('SeedSelected', campaignId, taskId, step),
  /** A queued candidate discarded by the planner (a CandidateRejected on the campaign stream). */
  candidateDiscarded: (campaignId: string, candidateId: string) =>
    derivedUuid('CandidateRejected', campaignId, candidateId, 'discard'),
  taskInjected: (campaignId: string, taskId: string) => derivedUuid('TaskInjected', campaignId, taskId),
  poolPruned: (campaignId: string, step: number) => derivedUuid('PoolPruned', campaignId, step),
  // a synthesis run (activities/synthesis.ts)
  synthesisStarted: (synthesisId: string) => derivedUuid('SynthesisStarted', synthesisId),
  stageCompleted: (synthesisId: string, stage: string, attempt: number) =>
    derivedUuid('StageCompleted', synthesisId, stage, attempt),
  /** A model stage whose every answer was refused (its tokens go to the cost ledger once). */
  stageFailed: (synthesisId: string, stage: string, attempt: number) =>
    derivedUuid('StageFailed', synthesisId, stage, attempt),
  candidateRejected: (synthesisId: string) => derivedUuid('CandidateRejected', synthesisId),
  candidateValidated: (synthesisId: string) => derivedUuid('CandidateValidated', synthesisId),
  // the gateway's ingestion (activities/ingestion.ts)
  rolloutGroupScored: (campaignId: string, step: number, batchId: string, taskId: string) =>
    derivedUuid('RolloutGroupScored', 'gateway', campaignId, step, batchId, taskId),
  stepClosed: (campaignId: string, step: number) => derivedUuid('StepClosed', 'gateway', campaignId, step),
  // the aggregator
  stepAggregated: (campaignId: string, step: number) => derivedUuid('StepAggregated', campaignId, step),
  /** A step passed over under ingestion.missingSteps (the campaign's awaitStep). */
  stepSkipped: (campaignId: string, step: number) => derivedUuid('StepSkipped', campaignId, step),
  // the gateway (entry/gateway/routes/checkpoints.ts)
  checkpointSaved: (campaignId: string, checkpointId: string) =>
    derivedUuid('CheckpointSaved', campaignId, checkpointId),
  /**
   * A step's statistics record of one batch, named by its first task and that task's group count
   * after the step (a task's count only grows, so no other record of the campaign has the pair).
   */
  stepStatsRecorded: (campaignId: string, step: number, firstTaskId: string, groupCount: number) =>
    derivedUuid('StepStatsRecorded', campaignId, step, firstTaskId, groupCount),
  /**
   * The band change caused by one RolloutGroupScored of a campaign (the campaign is part of it:
   * two campaigns fed by one seeded producer run carry the same group event ids).
   */
  taskBandChanged: (campaignId: string, groupEventId: string) =>
    derivedUuid('TaskBandChanged', campaignId, groupEventId),
  /** A task's statistics after the last RolloutGroupScored of a campaign applied to it. */
  taskStatsUpdated: (campaignId: string, lastGroupEventId: string) =>
    derivedUuid('TaskStatsUpdated', campaignId, lastGroupEventId),
  // an evaluation of a checkpoint (activities/evaluation.ts): each task is scored once
  evaluationStarted: (evaluationId: string) => derivedUuid('EvaluationStarted', evaluationId),
  evaluationTaskScored: (evaluationId: string, taskId: string) =>
    derivedUuid('EvaluationTaskScored', evaluationId, taskId),
  evaluationCompleted: (evaluationId: string) => derivedUuid('EvaluationCompleted', evaluationId),
  evaluationFailed: (evaluationId: string) => derivedUuid('EvaluationFailed', evaluationId),
  // the dead-letter path (platform/kafka/dlq.ts): derived from the source position
  deadLettered: (topic: string, partition: number, offset: string | number, code: string) =>
    derivedUuid('DeadLettered', topic, partition, String(offset), code),
  // synthetic reward streams (stages/aggregator/trace.ts) and the simulated trainer loop (dev/harness)
  traceRolloutGroup: (campaignId: string, seed: number, step: number, task: number) =>
    derivedUuid('trace', campaignId, seed, step, task),
  traceStepClosed: (campaignId: string, step: number) => derivedUuid('StepClosed', campaignId, step),
  simulatedRolloutGroup: (campaignId: string, step: number, taskId: string) =>
    derivedUuid('sim-group', campaignId, step, taskId),
  simulatedStepClosed: (campaignId: string, step: number) => derivedUuid('sim-close', campaignId, step),
};

/** The claim check of an accepted rollout batch (entry/gateway/ingest.ts): one per (campaign, step, batch). */
export const rolloutBatchClaimId = (campaignId: string, step: number, batchId: string) =>
  derivedUuid('claim', 'rollout-batch', campaignId, step, batchId);

/** The OpenLineage run of a synthesis (analysis/export/openlineage.ts). */
export const openLineageRunId = (campaignId: string, synthesisId: string) =>
  derivedUuid('openlineage-run', campaignId, synthesisId);
