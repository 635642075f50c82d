// `rods doctor --campaign C`: the status report (analysis/status/report.ts) in words, each finding with
// what to restart or check. Pure: the same report always gives the same findings.
import type { CampaignStatusReport, Holds, WaitingFor } from './report.js';

/** stall: nothing moves until someone acts; warn: behind or suspicious; wait: normal waiting; ok. */
export type FindingLevel = 'stall' | 'warn' | 'wait' | 'ok';

export interface Finding {
  level: FindingLevel;
  /** Stable machine-readable kind (analysis/status/README.md). */
  code: string;
  what: string;
  /** What to restart or check; empty when nothing is to be done. */
  action: string;
}

/** An accepted batch older than this is not "in flight" any more: its ingestion did not run. */
export const UNPUBLISHED_GRACE_S = 30;
/** The relay is reported behind once its oldest unpublished event is older than this. */
export const RELAY_GRACE_S = 30;

const plural = (n: number, one: string, many = `${one}s`) => `${n} ${n === 1 ? one : many}`;
const ageS = (r: CampaignStatusReport, iso: string | null) =>
  iso === null ? null : Math.max(0, Math.round((Date.parse(r.checkedAt) - Date.parse(iso)) / 1000));
const reasons = (m: Record<string, number>) =>
  Object.entries(m)
    .sort((a, b) => b[1] - a[1] || a[0].localeCompare(b[0]))
    .map(([k, n]) => `${k} ${n}`)
    .join(', ');

export function diagnose(r: CampaignStatusReport): Finding[] {
  const out: Finding[] = [];
  const add = (level: FindingLevel, code: string, what: string, action = '') =>
    out.push({ level, code, what, action });
  const exec = r.execution;
  const q = r.worker.taskQueue ?? exec?.taskQueue ?? 'rods';
  const running = exec?.status === 'RUNNING';

  // The workflow and its worker.
  if (r.errors.temporal) {
    add(
      'stall',
      'temporal-unreachable',
      `Temporal did not answer: ${r.errors.temporal}`,
      'check the Temporal server and TEMPORAL_ADDRESS (`npm run stack:status`); the campaign waits until it is back',
    );
  } else if (!exec) {
    add(
      'stall',
      'no-workflow',
      `campaign ${r.campaignId} is registered but has no workflow on the Temporal server`,
      'create it again with the same config (`rods campaign start --config FILE --id ID`, or POST /v1/campaigns): that starts the missing workflow',
    );
  } else if (exec.status === 'COMPLETED') {
    add(
      'ok',
      'completed',
      `the campaign workflow completed at step ${r.step}${r.workflow?.status === 'stopped' ? ' (stopped)' : ''}`,
    );
  } else if (!running) {
    add(
      'stall',
      'workflow-closed',
      `the campaign workflow is ${exec.status.toLowerCase()}: nothing plans its steps any more`,
      'start a new campaign; this one stays in the event store for `rods replay`, `rods lineage` and `rods export`',
    );
  } else if (!r.worker.present) {
    add(
      'stall',
      'no-worker',
      `${r.worker.detail}: nothing runs the campaign workflow or its syntheses`,
      `start a worker on that task queue: \`rods worker --task-queue ${q}\``,
    );
  } else if (!r.worker.answered) {
    add(
      'warn',
      'worker-not-answering',
      r.worker.detail,
      'check the worker log (is it stuck or overloaded?) and restart `rods worker` if it does not recover',
    );
  }
  if (running && r.status === 'paused')
    add(
      'wait',
      'paused',
      'the campaign is paused: it plans no step until resumed',
      `\`rods campaign resume ${r.campaignId}\``,
    );

  if (r.holds) holdFindings(r, r.holds, add, running, q);

  for (const [part, message] of Object.entries(r.errors)) {
    if (part === 'temporal' || part === 'query') continue;
    add('warn', 'unread', `could not read ${part}: ${message}`, 'check that service');
  }
  if (!out.some((f) => f.level === 'stall' || f.level === 'warn'))
    add('ok', 'nothing-holds', `nothing holds campaign ${r.campaignId}`);
  return out;
}

type Add = (level: FindingLevel, code: string, what: string, action?: string) => void;

function holdFindings(r: CampaignStatusReport, h: Holds, add: Add, running: boolean, q: string): void {
  const exec = r.execution;
  for (const p of h.stuckPartitions ?? [])
    add(
      'stall',
      'partition-stuck',
      `partition ${p.partition} of ${p.topic} has not moved past offset ${p.offset} since ${p.since}: ${p.reason}; every campaign whose tasks hash to it waits`,
      `see the aggregator's log; to move past that one record: \`rods partitions skip --topic ${p.topic} --partition ${p.partition} --offset ${p.offset} --reason "..."\` (a dead letter and an event)`,
    );
  if (h.parked)
    add(
      'wait',
      'records-parked',
      `${h.parked.records} record(s) of this campaign on ${h.parked.partitions} partition(s) are set aside since ${h.parked.oldestParkedAt} (${h.parked.reason}); the aggregator applies them in order and dead-letters those that fail (processing-failed), and the campaign's steps wait for them`,
      "if the count does not fall, see the aggregator's log (`records failed`, `parked records drained`)",
    );
  const m = h.missingStep;
  if (m) {
    const passing = m.policy === 'move-on';
    add(
      passing ? 'wait' : 'stall',
      'missing-step',
      passing
        ? `${m.detail}; the campaign passes over it (StepSkipped) ${m.refusal ? 'now (its closing batch was refused)' : `once ${m.afterSteps} later steps closed (${m.laterClosed} so far)`}`
        : `${m.detail}; the campaign waits for it (ingestion.missingSteps.policy = wait), and the gateway refuses a step behind the last closed one`,
      passing
        ? ''
        : `\`rods campaign reconfigure ${r.campaignId}\` with ingestion.missingSteps.policy "move-on" to pass over step ${m.step}; check why the trainer never closed it (its reporter's spool, rejected/)`,
    );
  }
  for (const w of h.checkpointsWaiting ?? [])
    add(
      'wait',
      'checkpoint-waiting',
      `checkpoint ${w.checkpointId} (step ${w.trainerStep}) waits${w.waitsForStep === null ? '' : ` for step ${w.waitsForStep}`}: ${w.reason} (asked ${w.attempts} time${w.attempts === 1 ? '' : 's'} since ${w.firstAskedAt}, last at ${w.lastAskedAt})`,
      m?.policy === 'move-on'
        ? 'it is recorded once the missing step is passed over; the trainer keeps sending later steps meanwhile'
        : "it is recorded once every step up to it closes: see missing-step above, or the trainer's spool (rejected/)",
    );
  if (running && h.closedNotPlanned > 0 && !m)
    add(
      r.worker.present ? 'wait' : 'stall',
      'closed-not-planned',
      `${plural(h.closedNotPlanned, 'closed step')} not planned yet (closed up to ${h.lastClosedStep}, planned up to ${h.lastPlannedStep})`,
      r.worker.present ? '' : `start \`rods worker --task-queue ${q}\``,
    );

  // The oldest open step and what it waits for.
  const o = h.oldestOpenStep;
  if (o && (running || !exec)) {
    const waits = new Set<WaitingFor>(o.waitingFor);
    if (waits.has('trainer-batches'))
      add(
        'wait',
        'trainer-batches',
        `step ${o.step}: no rollout batch received from the trainer yet`,
        `the trainer sends step ${o.step} (POST /v1/campaigns/${r.campaignId}/steps/${o.step}/rollouts)`,
      );
    if (waits.has('trainer-close'))
      add(
        'wait',
        'trainer-close',
        `step ${o.step}: ${plural(o.batches.accepted + o.batches.published, 'batch', 'batches')} received, none closing the step`,
        `the trainer must send step ${o.step}'s last batch with "close": true`,
      );
    if (waits.has('unpublished-batches')) {
      const oldest =
        o.unpublishedBatches.map((b) => ageS(r, b.acceptedAt) ?? 0).sort((a, b) => b - a)[0] ?? 0;
      const stuck = oldest > UNPUBLISHED_GRACE_S;
      add(
        stuck ? 'stall' : 'wait',
        'unpublished-batches',
        `step ${o.step}: ${plural(o.unpublishedBatches.length, 'batch', 'batches')} accepted but not published to Kafka (oldest accepted ${oldest} s ago: ${o.unpublishedBatches
          .slice(0, 5)
          .map((b) => b.batchId)
          .join(', ')}${o.unpublishedBatches.length > 5 ? ', ...' : ''})`,
        stuck
          ? `their ingestion workflows did not run: check that a worker polls the gateway's task queue and that Kafka is up; the trainer may re-send the same batch ids`
          : '',
      );
    }
    if (waits.has('aggregator-declare'))
      add(
        'stall',
        'aggregator-declare',
        `step ${o.step}: its closing batch is published but no aggregator has read its StepClosed`,
        'check that `rods aggregator` runs (aggregator lag below)',
      );
    if (waits.has('aggregator-groups')) {
      const lag = h.aggregator?.totalLag ?? null;
      add(
        lag === 0 && !waits.has('unpublished-batches') ? 'stall' : 'wait',
        'aggregator-groups',
        `step ${o.step}: ${o.countedGroups} of ${o.declaredGroups} declared groups counted (${o.missingGroups} missing)`,
        lag === 0
          ? o.unpublishedBatches.length > 0
            ? 'the aggregator has read everything on the rewards topic: the missing groups were never published (see unpublished batches)'
            : // Every batch says published, yet its records are not all on the topic: Kafka
              // acknowledged a send whose records were not written (a client fault; the batches'
              // claim checks still hold the groups). Nothing re-publishes a published batch.
              `the aggregator has read everything on the rewards topic, yet every batch of step ${o.step} is marked published (${o.batches.published}): Kafka acknowledged records that are not on the topic, and nothing re-publishes a published batch; the batches' claim checks still hold the groups`
          : lag === null
            ? 'check that `rods aggregator` runs'
            : `the aggregator is ${lag} records behind: check that \`rods aggregator\` runs`,
      );
    }
    if (waits.has('aggregator-close'))
      add(
        'wait',
        'aggregator-close',
        `step ${o.step}: every declared group is counted; the step is not closed yet`,
        'an aggregator closes it on its next sweep: check that `rods aggregator` runs',
      );
  }
  const elsewhere = h.unpublishedBatches.count - (o?.unpublishedBatches.length ?? 0);
  if (elsewhere > 0) {
    const age = ageS(r, h.unpublishedBatches.oldestAcceptedAt) ?? 0;
    add(
      age > UNPUBLISHED_GRACE_S ? 'warn' : 'wait',
      'unpublished-batches-later',
      `${plural(elsewhere, 'more batch', 'more batches')} of later steps accepted but not published (oldest ${age} s ago)`,
      age > UNPUBLISHED_GRACE_S ? "check the worker on the gateway's task queue and Kafka" : '',
    );
  }

  // Syntheses.
  if (h.overdueSyntheses.length > 0) {
    const ids = h.overdueSyntheses.slice(0, 5).map((s) => `${s.synthesisId} (${s.runningS} s)`);
    add(
      'warn',
      'overdue-syntheses',
      `${plural(h.overdueSyntheses.length, 'synthesis', 'syntheses')} running longer than ${h.synthesisTimeoutS} s: ${ids.join(', ')}${h.overdueSyntheses.length > 5 ? ', ...' : ''}`,
      `each holds one of the campaign's synthesis slots: check the worker log and the generator endpoint; a stuck one can be terminated with \`temporal workflow terminate --workflow-id ID\``,
    );
  }

  // Relay, aggregator, dead letters.
  if (h.relay) {
    const rl = h.relay;
    if (rl.checkpoint === null)
      add(
        'warn',
        'relay-never-ran',
        `relay "${rl.name}" has never published (${rl.unpublishedEvents}${rl.capped ? '+' : ''} events in the store)`,
        `start \`rods relay --name ${rl.name}\` (or name the relay you run with --relay-name)`,
      );
    else if (rl.unpublishedEvents > 0) {
      const age = ageS(r, rl.oldestUnpublishedAt) ?? 0;
      if (age > RELAY_GRACE_S)
        add(
          'warn',
          'relay-behind',
          `relay "${rl.name}" is ${rl.unpublishedEvents}${rl.capped ? '+' : ''} events behind the store (${rl.unpublishedCampaignEvents} of this campaign; oldest ${age} s ago)`,
          `check that \`rods relay --name ${rl.name}\` runs and Kafka is up`,
        );
    }
  }
  if (h.aggregator && h.aggregator.totalLag > 0) {
    const parts = h.aggregator.partitions
      .filter((p) => p.lag > 0)
      .map((p) => `p${p.partition}: ${p.lag}`)
      .join(', ');
    add(
      'warn',
      'aggregator-lag',
      `aggregator group ${h.aggregator.groupId} is ${h.aggregator.totalLag} records behind on ${h.aggregator.topic} (${parts})`,
      'check that `rods aggregator` runs; a partition that never moves: see its log',
    );
  }
  const d = h.deadLetters;
  if (d && d.total > 0)
    add(
      'warn',
      'dead-letters',
      `${plural(d.total, 'record')} of this campaign dead-lettered since ${d.since ?? 'the start'} (${reasons(d.byReason)})`,
      'these groups never count: fix what the trainer sends (reasons above; the records are on rods.dlq.v1)',
    );
  if (d && Object.keys(d.unattributed).length > 0)
    add(
      'wait',
      'dead-letters-unattributed',
      `dead letters naming no campaign since ${d.since ?? 'the start'}: ${reasons(d.unattributed)}`,
      'undecodable records on the rewards topic: see rods.dlq.v1',
    );
}

const LABEL: Record<FindingLevel, string> = { stall: 'STALL', warn: 'WARN ', wait: 'wait ', ok: 'ok   ' };

/** The findings as lines for a terminal. */
export function renderFindings(r: CampaignStatusReport, findings: readonly Finding[]): string {
  const lines = [
    `campaign ${r.campaignId}: ${r.status}, step ${r.step}, pool version ${r.poolVersion} (from ${r.source})`,
  ];
  for (const f of findings) {
    lines.push(`${LABEL[f.level]} ${f.what}`);
    if (f.action) lines.push(`      -> ${f.action}`);
  }
  return lines.join('\n');
}
