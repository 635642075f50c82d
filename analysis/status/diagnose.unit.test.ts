// The doctor's words for a campaign (analysis/status/diagnose.ts), from status reports built by hand.
import { describe, expect, it } from 'vitest';
import { diagnose, renderFindings } from './diagnose.js';
import type { CampaignStatusReport, Holds } from './report.js';

const AT = '2026-01-01T12:00:00.000Z';
const ago = (s: number) => new Date(Date.parse(AT) - s * 1000).toISOString();

function holds(over: Partial<Holds> = {}): Holds {
  return {
    lastClosedStep: 6,
    lastClosedAt: ago(100),
    lastPlannedStep: 6,
    oldestOpenStep: null,
    closedNotPlanned: 0,
    missingStep: null,
    checkpointsWaiting: [],
    stuckPartitions: [],
    parked: null,
    unpublishedBatches: { count: 0, groups: 0, oldestAcceptedAt: null },
    runningSyntheses: 0,
    synthesisTimeoutS: 1800,
    overdueSyntheses: [],
    relay: {
      name: 'main',
      checkpoint: { transactionId: '900', position: 1200 },
      unpublishedEvents: 0,
      unpublishedCampaignEvents: 0,
      capped: false,
      oldestUnpublishedAt: null,
    },
    aggregator: { groupId: 'rods-aggregator', topic: 'rods.rewards.v1', totalLag: 0, partitions: [] },
    deadLetters: { since: ago(100), total: 0, byReason: {}, unattributed: {}, scanned: 10, truncated: false },
    ...over,
  };
}

function report(over: Partial<CampaignStatusReport> = {}): CampaignStatusReport {
  return {
    format: 'rods.campaign-status/1',
    campaignId: 'c1',
    name: 'c1',
    checkedAt: AT,
    status: 'running',
    source: 'workflow',
    step: 6,
    poolVersion: 3,
    worker: {
      present: true,
      taskQueue: 'rods',
      pollers: [{ identity: 'w@host', lastPollAgoS: 2 }],
      answered: true,
      detail: '1 poller(s) on task queue rods; the workflow answered',
    },
    execution: {
      workflowId: 'campaign-c1',
      runId: 'r1',
      status: 'RUNNING',
      taskQueue: 'rods',
      historyLength: 100,
      startTime: ago(1000),
      closeTime: null,
    },
    workflow: null,
    pool: {} as CampaignStatusReport['pool'],
    holds: holds(),
    errors: {},
    ...over,
  };
}

const codes = (r: CampaignStatusReport) => diagnose(r).map((f) => `${f.level}:${f.code}`);

describe('diagnose', () => {
  it('a healthy campaign waiting for its trainer: nothing holds it', () => {
    const r = report({
      holds: holds({
        oldestOpenStep: {
          step: 7,
          declaredGroups: null,
          countedGroups: 0,
          appliedGroups: 0,
          rejectedGroups: 0,
          missingGroups: null,
          batches: { accepted: 0, published: 0, closingReceived: false },
          unpublishedBatches: [],
          waitingFor: ['trainer-batches'],
        },
      }),
    });
    expect(codes(r)).toEqual(['wait:trainer-batches', 'ok:nothing-holds']);
    expect(diagnose(r)[0]?.what).toBe('step 7: no rollout batch received from the trainer yet');
  });

  it('parked records: a wait naming how many, since when and why', () => {
    const r = report({
      holds: holds({
        parked: {
          records: 120,
          partitions: 2,
          oldestParkedAt: ago(30),
          reason: 'its records failed to fold: boom',
        },
      }),
    });
    expect(codes(r)).toContain('wait:records-parked');
    const f = diagnose(r).find((x) => x.code === 'records-parked')!;
    expect(f.what).toContain('120 record(s) of this campaign on 2 partition(s)');
    expect(f.what).toContain('its records failed to fold: boom');
    expect(codes(report())).not.toContain('wait:records-parked');
  });

  it('no worker: a stall naming the task queue and the command to start', () => {
    const r = report({
      source: 'projections',
      worker: {
        present: false,
        taskQueue: 'rods-demo-1',
        pollers: [],
        answered: false,
        detail: 'no worker polls task queue rods-demo-1 (last poll 300 s ago)',
      },
      holds: holds({ lastClosedStep: 8, closedNotPlanned: 2 }),
    });
    const f = diagnose(r);
    expect(f[0]).toEqual({
      level: 'stall',
      code: 'no-worker',
      what: 'no worker polls task queue rods-demo-1 (last poll 300 s ago): nothing runs the campaign workflow or its syntheses',
      action: 'start a worker on that task queue: `rods worker --task-queue rods-demo-1`',
    });
    expect(f[1]).toMatchObject({
      level: 'stall',
      code: 'closed-not-planned',
      what: '2 closed steps not planned yet (closed up to 8, planned up to 6)',
    });
  });

  it('a step that never closed while later ones did: a stall under `wait`, a wait under `move-on`', () => {
    const missing = {
      step: 7,
      laterClosed: 2,
      laterFrom: 8,
      laterTo: 9,
      received: { batches: 1, groups: 30 },
      refusal: null,
      afterSteps: 3,
      detail:
        'step 7 never closed while 2 later steps did (8-9); 1 batch (30 groups) were received for it, none closing it',
    };
    const waiting = diagnose(
      report({
        holds: holds({ lastClosedStep: 9, closedNotPlanned: 3, missingStep: { ...missing, policy: 'wait' } }),
      }),
    );
    expect(waiting.map((f) => f.code)).toEqual(['missing-step']);
    expect(waiting[0]).toMatchObject({ level: 'stall' });
    expect(waiting[0]!.what).toContain('step 7 never closed while 2 later steps did (8-9)');
    expect(waiting[0]!.action).toContain('ingestion.missingSteps.policy "move-on"');
    const passing = diagnose(
      report({
        holds: holds({
          lastClosedStep: 9,
          closedNotPlanned: 3,
          missingStep: { ...missing, policy: 'move-on' },
        }),
      }),
    );
    expect(passing.map((f) => [f.code, f.level])).toEqual([
      ['missing-step', 'wait'],
      ['nothing-holds', 'ok'],
    ]);
    expect(passing[0]!.what).toContain('once 3 later steps closed (2 so far)');
  });

  it('a step waiting for groups, with an old unpublished batch and aggregator lag', () => {
    const r = report({
      holds: holds({
        oldestOpenStep: {
          step: 7,
          declaredGroups: 400,
          countedGroups: 380,
          appliedGroups: 379,
          rejectedGroups: 1,
          missingGroups: 20,
          batches: { accepted: 1, published: 3, closingReceived: true },
          unpublishedBatches: [{ batchId: 'b2', groups: 20, closes: false, acceptedAt: ago(600) }],
          waitingFor: ['unpublished-batches', 'aggregator-groups'],
        },
        unpublishedBatches: { count: 1, groups: 20, oldestAcceptedAt: ago(600) },
        aggregator: {
          groupId: 'rods-aggregator',
          topic: 'rods.rewards.v1',
          totalLag: 12,
          partitions: [
            { partition: 0, highWatermark: 50, storedOffset: 50, committedOffset: 50, lag: 0 },
            { partition: 3, highWatermark: 40, storedOffset: 28, committedOffset: 28, lag: 12 },
          ],
        },
      }),
    });
    const f = diagnose(r);
    expect(f.map((x) => `${x.level}:${x.code}`)).toEqual([
      'stall:unpublished-batches',
      'wait:aggregator-groups',
      'warn:aggregator-lag',
    ]);
    expect(f[0]?.what).toBe(
      'step 7: 1 batch accepted but not published to Kafka (oldest accepted 600 s ago: b2)',
    );
    expect(f[0]?.action).toMatch(/worker polls the gateway's task queue/);
    expect(f[1]?.what).toBe('step 7: 380 of 400 declared groups counted (20 missing)');
    expect(f[1]?.action).toBe('the aggregator is 12 records behind: check that `rods aggregator` runs');
    expect(f[2]?.what).toBe(
      'aggregator group rods-aggregator is 12 records behind on rods.rewards.v1 (p3: 12)',
    );
  });

  it('overdue syntheses, relay behind, dead letters by reason', () => {
    const r = report({
      holds: holds({
        runningSyntheses: 2,
        overdueSyntheses: [
          {
            synthesisId: 'synth-c1-3-t9',
            seedTaskId: 't9',
            step: 3,
            selectedAt: ago(4000),
            startedAt: ago(3990),
            runningS: 4000,
          },
        ],
        relay: {
          name: 'main',
          checkpoint: { transactionId: '900', position: 1200 },
          unpublishedEvents: 340,
          unpublishedCampaignEvents: 40,
          capped: false,
          oldestUnpublishedAt: ago(120),
        },
        deadLetters: {
          since: ago(100),
          total: 3,
          byReason: { 'stale-step': 1, 'reward-out-of-range': 2 },
          unattributed: { 'bad-magic': 1 },
          scanned: 50,
          truncated: false,
        },
      }),
    });
    const f = diagnose(r);
    expect(f.map((x) => `${x.level}:${x.code}`)).toEqual([
      'warn:overdue-syntheses',
      'warn:relay-behind',
      'warn:dead-letters',
      'wait:dead-letters-unattributed',
    ]);
    expect(f[0]?.what).toBe('1 synthesis running longer than 1800 s: synth-c1-3-t9 (4000 s)');
    expect(f[1]?.what).toBe(
      'relay "main" is 340 events behind the store (40 of this campaign; oldest 120 s ago)',
    );
    expect(f[1]?.action).toBe('check that `rods relay --name main` runs and Kafka is up');
    expect(f[2]?.what).toBe(
      `3 records of this campaign dead-lettered since ${ago(100)} (reward-out-of-range 2, stale-step 1)`,
    );
  });

  it('a completed workflow, a missing one, Temporal away', () => {
    const done = report({
      status: 'completed',
      source: 'workflow-result',
      execution: { ...report().execution!, status: 'COMPLETED', closeTime: ago(5) },
    });
    expect(codes(done)).toEqual(['ok:completed', 'ok:nothing-holds']);
    const missing = report({ source: 'projections', execution: null, status: 'no-workflow' });
    expect(diagnose(missing)[0]).toMatchObject({ level: 'stall', code: 'no-workflow' });
    const away = report({
      source: 'projections',
      execution: null,
      errors: { temporal: 'connect ECONNREFUSED' },
    });
    expect(diagnose(away)[0]).toMatchObject({
      level: 'stall',
      code: 'temporal-unreachable',
      what: 'Temporal did not answer: connect ECONNREFUSED',
    });
  });

  it('renders one line per finding and its action', () => {
    const r = report({ holds: holds({ closedNotPlanned: 0 }) });
    expect(renderFindings(r, diagnose(r))).toBe(
      [
        'campaign c1: running, step 6, pool version 3 (from workflow)',
        'ok    nothing holds campaign c1',
      ].join('\n'),
    );
  });

  it('a step whose batches are all published while the aggregator read everything: records acknowledged but missing', () => {
    const r = report({
      holds: holds({
        oldestOpenStep: {
          step: 132,
          declaredGroups: 40,
          countedGroups: 22,
          appliedGroups: 22,
          rejectedGroups: 0,
          missingGroups: 18,
          batches: { accepted: 0, published: 3, closingReceived: true },
          unpublishedBatches: [],
          waitingFor: ['aggregator-groups'],
        },
        aggregator: { groupId: 'rods-aggregator', topic: 'rods.rewards.v1', totalLag: 0, partitions: [] },
      }),
    });
    const f = diagnose(r).find((x) => x.code === 'aggregator-groups')!;
    expect(f.level).toBe('stall');
    expect(f.what).toBe('step 132: 22 of 40 declared groups counted (18 missing)');
    expect(f.action).toContain('every batch of step 132 is marked published (3)');
    expect(f.action).toContain('Kafka acknowledged records that are not on the topic');
    expect(f.action).not.toContain('never published');
  });
});
