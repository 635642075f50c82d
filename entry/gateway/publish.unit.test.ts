// The gateway's direct publish with a fake producer and database (no services): what it sends,
// when it marks, and when it leaves the batch to its ingestion workflow.
import type pg from 'pg';
import { describe, expect, it } from 'vitest';
import { decode } from '../../platform/codec/registry.js';
import type { OutgoingRecord } from '../../platform/kafka/port.js';
import { type RolloutBatchBody, rolloutBatchRecords } from '../../platform/kafka/rollout-records.js';
import { readStoredRolloutBatch, storedRolloutBatch } from '../../platform/store/steps/batches.js';
import type { Accepted } from './ingest.js';
import { type BatchSender, DirectPublisher } from './publish.js';

const body: RolloutBatchBody = {
  campaignId: 'c',
  step: 3,
  batchId: 'b',
  policyVersion: 'p',
  groups: Array.from({ length: 150 }, (_, i) => ({ taskId: `t${i}`, rewards: [i % 2 ? 1 : -0, 0.25] })),
  close: true,
  receivedAt: 1_764_547_200_000,
};
const accepted = (b = body, stepGroups: number | null = 170): Accepted => ({
  duplicate: false,
  workflowId: 'ingest-c-3-b',
  claimId: 'claim',
  groups: b.groups.length,
  close: b.close,
  published: false,
  body: b,
  stepGroups: b.close ? stepGroups : null,
});

function fakes(send: BatchSender['send'], mark: () => Promise<unknown> = async () => ({ rowCount: 1 })) {
  const sent: OutgoingRecord[][] = [];
  const queries: { text: string; values: unknown[] }[] = [];
  const producer: BatchSender = {
    send: async (topic, records) => {
      expect(topic).toBe('rewards');
      sent.push(records);
      return send(topic, records);
    },
  };
  const db = {
    query: async (text: string, values: unknown[]) => {
      queries.push({ text, values });
      return mark();
    },
  } as unknown as pg.Pool;
  return { sent, queries, producer, db };
}

const bytes = (rs: OutgoingRecord[]) => rs.map((r) => [String(r.key), (r.value as Buffer).toString('hex')]);

describe('DirectPublisher', () => {
  it('sends the records the ingestion activity would send from the claim check, then marks the batch', async () => {
    const f = fakes(async () => {});
    const p = new DirectPublisher({ db: f.db, producer: f.producer, topic: 'rewards' });
    const groups = await p.encodeGroups(body);
    expect(await p.publish(accepted(), groups)).toBe(true);
    const fromStore = readStoredRolloutBatch(JSON.parse(JSON.stringify(storedRolloutBatch(body))));
    expect(bytes(f.sent[0]!)).toEqual(bytes(rolloutBatchRecords(fromStore, 170)));
    expect(f.sent[0]).toHaveLength(151);
    const close = decode(f.sent[0]![150]!.value as Buffer);
    expect(close).toMatchObject({
      name: 'StepClosed',
      payload: { campaignId: 'c', step: 3, groupCount: 170 },
    });
    expect(f.queries).toHaveLength(1);
    expect(f.queries[0]!.text).toMatch(/update ingestion_batches set status = 'published'/);
    expect(f.queries[0]!.text).toMatch(/synchronous_commit/);
    expect(f.queries[0]!.values).toEqual(['c', 3, 'b', 170]);
  });

  it('encodes the records itself when given none, and sends no StepClosed for a batch that does not close', async () => {
    const f = fakes(async () => {});
    const open = { ...body, close: false };
    const p = new DirectPublisher({ db: f.db, producer: f.producer, topic: 'rewards' });
    expect(await p.publish(accepted(open))).toBe(true);
    expect(bytes(f.sent[0]!)).toEqual(bytes(rolloutBatchRecords(open, null)));
    expect(f.queries[0]!.values).toEqual(['c', 3, 'b', null]);
  });

  it('leaves the batch to its workflow, unmarked, when the send fails or does not finish in time', async () => {
    const failing = fakes(async () => {
      throw new Error('broker away');
    });
    const warnings: string[] = [];
    const log = { warn: (_: object, msg: string) => warnings.push(msg) };
    expect(
      await new DirectPublisher({ db: failing.db, producer: failing.producer, topic: 'rewards' }).publish(
        accepted(),
        undefined,
        log,
      ),
    ).toBe(false);
    expect(failing.queries).toHaveLength(0);
    const hanging = fakes(() => new Promise<void>(() => {}));
    const p = new DirectPublisher({
      db: hanging.db,
      producer: hanging.producer,
      topic: 'rewards',
      timeoutMs: 10,
    });
    expect(await p.publish(accepted(), undefined, log)).toBe(false);
    expect(hanging.queries).toHaveLength(0);
    expect(warnings).toEqual([
      'direct publish failed: the ingestion workflow publishes the batch',
      'direct publish timed out: the ingestion workflow publishes the batch',
    ]);
  });

  it('answers published when only the mark fails (the reconciler publishes again, deduplicated)', async () => {
    const f = fakes(
      async () => {},
      async () => {
        throw new Error('database away');
      },
    );
    const p = new DirectPublisher({ db: f.db, producer: f.producer, topic: 'rewards' });
    expect(await p.publish(accepted())).toBe(true);
    expect(f.sent).toHaveLength(1);
  });

  it('publishes nothing for a duplicate (no body)', async () => {
    const f = fakes(async () => {});
    const p = new DirectPublisher({ db: f.db, producer: f.producer, topic: 'rewards' });
    expect(await p.publish({ ...accepted(), duplicate: true, body: undefined })).toBe(false);
    expect(f.sent).toHaveLength(0);
  });
});
