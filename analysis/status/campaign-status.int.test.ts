// What holds a campaign, with no worker on its task queue: a campaign created through the gateway
// (its workflow never runs), a step whose StepClosed declared 5 groups of which 3 are counted,
// and a batch accepted but never published (its ingestion workflow has no worker either). The
// gateway's GET, `rods campaign status --json` and `rods doctor --campaign` name that step,
// declared vs counted groups and the unpublished batch, and say that no worker is there, from
// PostgreSQL's projections (before, the CLI asked the workflow and waited for ever).
import { execFile } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import path from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { workflowIds } from '../../domain/ids.js';
import { type KafkaClient, openKafka } from '../../platform/kafka/client.js';
import { deadLetter } from '../../platform/kafka/dlq.js';
import { inTransaction } from '../../platform/store/db.js';
import { declareSteps, recordStepProgress } from '../../platform/store/steps/progress.js';
import { StepTallies } from '../../stages/aggregator/step-progress.js';
import {
  type GatewayUnderTest,
  startGatewayUnderTest,
} from '../../test/support/gateway/gateway-under-test.js';
import { ROOT } from '../../test/support/sources.js';
import { campaignStatus } from './campaign-status.js';
import { campaignOf } from './kafka.js';
import { StatusKafka } from './kafka-shared.js';
import type { CampaignStatusReport } from './report.js';

const execFileP = promisify(execFile);
const TOKEN = `tok-${randomUUID()}`;
const taskQueue = `status-noworker-${randomUUID().slice(0, 8)}`;
const campaignId = `status-${randomUUID().slice(0, 8)}`;
const AUTH = { authorization: `Bearer ${TOKEN}` };
let gw: GatewayUnderTest;

/** Runs the CLI; a deadline only so that a hang fails the test instead of the whole run. */
function rods(args: string[]) {
  return execFileP(process.execPath, [path.join(ROOT, 'bin/rods.mjs'), ...args], {
    cwd: ROOT,
    maxBuffer: 16 << 20,
    timeout: 120_000,
  }).catch((e: { code?: number | string; stdout?: string; stderr?: string; killed?: boolean }) => {
    if (e.killed) throw new Error(`rods ${args.join(' ')} did not answer: killed at its deadline`);
    return { stdout: e.stdout ?? '', stderr: e.stderr ?? '', code: e.code };
  });
}

function expectHolds(r: Pick<CampaignStatusReport, 'holds' | 'worker' | 'source' | 'execution'>) {
  expect(r.source).toBe('projections');
  expect(r.execution?.status).toBe('RUNNING');
  expect(r.worker).toMatchObject({ present: false, answered: false, taskQueue });
  expect(r.worker.detail).toMatch(new RegExp(`no worker polls task queue ${taskQueue}`));
  const o = r.holds?.oldestOpenStep;
  expect(o).toMatchObject({
    step: 1,
    declaredGroups: 5,
    countedGroups: 3,
    appliedGroups: 3,
    missingGroups: 2,
    batches: { accepted: 1, published: 0, closingReceived: false },
  });
  expect(o?.unpublishedBatches.map((b) => [b.batchId, b.groups])).toEqual([['b-unpublished', 2]]);
  expect(o?.waitingFor).toEqual(expect.arrayContaining(['unpublished-batches', 'aggregator-groups']));
  expect(r.holds?.unpublishedBatches).toMatchObject({ count: 1, groups: 2 });
}

beforeAll(async () => {
  gw = await startGatewayUnderTest({ application: 'rods-status-test', tokens: [TOKEN], taskQueue });
  const created = await gw.app.inject({
    method: 'POST',
    url: '/v1/campaigns',
    headers: AUTH,
    // no worker seeds its pool: it counts the tasks its batches name
    payload: { campaignId, config: { seeds: { perCategory: 1 }, ingestion: { unknownTasks: 'accept' } } },
  });
  expect(created.statusCode).toBe(201);
  // A batch the gateway accepted; with no worker its ingestion never publishes it.
  const batch = await gw.app.inject({
    method: 'POST',
    url: `/v1/campaigns/${campaignId}/steps/1/rollouts`,
    headers: AUTH,
    payload: {
      batchId: 'b-unpublished',
      policyVersion: 'p1',
      groups: [
        { taskId: 't1', rewards: [0.5, 0.25] },
        { taskId: 't2', rewards: [1, 0] },
      ],
    },
  });
  expect(batch.statusCode).toBe(202);
  // What an aggregator records: step 1 declared with 5 groups, 3 of them counted.
  const tallies = new StepTallies();
  for (let i = 0; i < 3; i++) tallies.applied(campaignId, 1, 'boundary', 0.1);
  await inTransaction(gw.db, async (c) => {
    await recordStepProgress(c, 'rods.rewards.v1', 0, tallies.all());
    await declareSteps(c, [{ campaignId, step: 1, groupCount: 5 }]);
  });
}, 120_000);

afterAll(async () => {
  await gw?.client.workflow
    .getHandle(workflowIds.campaign(campaignId))
    .terminate('test over')
    .catch(() => {});
  await gw?.close([campaignId]);
});

describe('campaign status with no worker on its task queue', () => {
  it('the gateway names the open step, declared vs counted groups, the unpublished batch and the missing worker', async () => {
    const res = await gw.app.inject({ method: 'GET', url: `/v1/campaigns/${campaignId}`, headers: AUTH });
    expect(res.statusCode).toBe(200);
    const body = res.json();
    expectHolds(body);
    expect(body).toMatchObject({ campaignId, workflow: null, status: 'running' });
    expect(body.workflowError).toMatch(/no worker polls/);
    // ?holds=false: the cheap form for polling.
    const brief = await gw.app.inject({
      method: 'GET',
      url: `/v1/campaigns/${campaignId}?holds=false`,
      headers: AUTH,
    });
    expect(brief.json()).toMatchObject({ campaignId, holds: null, worker: { present: false } });
  });

  it('`rods campaign status --json` answers from the projections and says no worker is there', async () => {
    const r = await rods(['campaign', 'status', campaignId, '--json']);
    const report = JSON.parse(r.stdout) as CampaignStatusReport;
    expect(report.format).toBe('rods.campaign-status/1');
    expectHolds(report);
  }, 150_000);

  it('`rods doctor --campaign` says it in words and exits 1 on the stall', async () => {
    const r = await rods(['doctor', '--campaign', campaignId]);
    expect((r as { code?: number }).code).toBe(1);
    expect(r.stdout).toContain(`STALL no worker polls task queue ${taskQueue}`);
    expect(r.stdout).toContain(`rods worker --task-queue ${taskQueue}`);
    expect(r.stdout).toContain('step 1: 3 of 5 declared groups counted (2 missing)');
    expect(r.stdout).toContain('step 1: 1 batch accepted but not published to Kafka');
  }, 150_000);
});

describe('status calls of a long-lived process', () => {
  it('share one Kafka admin and one dead-letter reader, and count a dead letter written between calls', async () => {
    // Counts what the status part opens (before: an admin and a consumer group per call).
    const real = openKafka({ clientId: 'status-shared-test', retries: 1, quiet: true });
    const opened = { admins: 0, consumers: 0 };
    const counting: KafkaClient = {
      producer: (o) => real.producer(o),
      transactionalProducer: (o) => real.transactionalProducer(o),
      batchConsumer: (o) => {
        opened.consumers++;
        return real.batchConsumer(o);
      },
      admin: () => {
        opened.admins++;
        return real.admin();
      },
    };
    const shared = new StatusKafka(campaignOf, counting);
    const producer = await real.producer();
    const letter = (n: number) =>
      deadLetter(producer, {
        code: 'status-test',
        reason: `letter ${n}`,
        topic: 'rods.status-test',
        partition: 0,
        offset: String(n),
        key: null,
        // The relay's form: the stored event as JSON, naming its campaign.
        value: Buffer.from(JSON.stringify({ campaignId })),
      });
    try {
      await letter(Date.now());
      const counts: number[] = [];
      for (let i = 0; i < 4; i++) {
        const r = await campaignStatus({ db: gw.db, temporal: null, statusKafka: shared }, campaignId, {
          kafkaTimeoutMs: 20_000,
        });
        // No Temporal here (temporal: null); every Kafka part answered.
        expect(Object.keys(r?.errors ?? {}).filter((k) => k !== 'temporal')).toEqual([]);
        counts.push(r?.holds?.deadLetters?.byReason['status-test'] ?? 0);
      }
      // The first answer already had the letter written before the reader started.
      expect(counts).toEqual([1, 1, 1, 1]);
      await letter(Date.now() + 1);
      let seen = 1;
      for (let i = 0; i < 40 && seen < 2; i++) {
        await new Promise((r) => setTimeout(r, 250));
        const r = await campaignStatus({ db: gw.db, temporal: null, statusKafka: shared }, campaignId, {
          kafkaTimeoutMs: 20_000,
        });
        seen = r?.holds?.deadLetters?.byReason['status-test'] ?? 0;
      }
      expect(seen).toBe(2);
      expect(opened).toEqual({ admins: 1, consumers: 1 });
    } finally {
      await producer.disconnect();
      await shared.close();
    }
  }, 120_000);
});
