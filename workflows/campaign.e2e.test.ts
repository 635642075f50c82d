// The loop end to end: seeding, per-step retirement/selection, synthesis children through the
// stand-in generator and the real environment executor, injection at the cadence, lineage, the
// JSONL sink and the campaign updates.
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { WorkflowUpdateFailedError } from '@temporalio/client';
import { temporal } from '@temporalio/proto';
import { describe, expect, it } from 'vitest';
import { executeUpdateWithRetry } from '../platform/temporal/connect.js';
import { standinCampaigns } from '../test/support/standin-campaign.js';
import { staysFalse, waitUntil } from '../test/support/wait.js';

const campaigns = standinCampaigns(['--seed', '7']);

describe('campaign loop', () => {
  it('seeds, selects boundary seeds, synthesizes, validates and injects with lineage, and obeys updates', async () => {
    const loop = await campaigns.start({
      seeds: { perCategory: 4 },
      detector: { low: 0.2, high: 0.85 },
      selection: {
        budgetPerStep: 4,
        perCategoryQuota: { base: 1, miss_func: 1, miss_param: 1, long_context: 1 },
        cooldownSteps: 1,
        maxConcurrentSyntheses: 4,
      },
      pool: { injectionCadence: 'steps:2' },
    });
    const h = loop.client.workflow.getHandle(loop.workflowId);

    // A bad reconfiguration is refused by the update's validator with a message.
    const refused = await h
      .executeUpdate('reconfigure', { args: [{ config: { pool: { generatedCap: -1 } } }] })
      .catch((e: unknown) => e);
    expect(refused).toBeInstanceOf(WorkflowUpdateFailedError);
    expect(String((refused as WorkflowUpdateFailedError).cause?.message)).toMatch(/generatedCap/);

    for (let step = 1; step <= 6; step++) {
      await loop.trainStep(step);
      await loop.waitPlanned(step);
      if (step % 2 === 1) await loop.waitSynthesesDone();
    }
    const s = await loop.waitSynthesesDone();
    expect(s.step).toBe(6);
    expect(s.totals.selected).toBeGreaterThan(0);
    expect(s.totals.validated + s.totals.rejected).toBe(s.totals.selected);

    const count = async (type: string) =>
      (
        await loop.pool.query<{ n: number }>(
          `select count(*)::int as n from events where type = $1 and payload->>'campaignId' = $2`,
          [type, loop.campaignId],
        )
      ).rows[0]!.n;
    expect(await count('TaskSeeded')).toBe(16);
    expect(await count('SeedSelected')).toBe(s.totals.selected);
    expect(await count('SynthesisStarted')).toBe(s.totals.selected);
    expect(await count('StageCompleted')).toBeGreaterThan(0);
    expect((await count('CandidateValidated')) + (await count('CandidateRejected'))).toBeGreaterThanOrEqual(
      s.totals.selected,
    );
    expect(await count('CandidateValidated')).toBeGreaterThan(0);
    expect(await count('TaskInjected')).toBeGreaterThan(0);

    // Every injected task traces to a human seed through its parents.
    const injected = await loop.pool.query<{
      task_id: string;
      parents: string[];
      root_seed: string;
      depth: number;
    }>(
      `select task_id, parents, root_seed, depth from pool_members where campaign_id = $1 and origin = 'generated'`,
      [loop.campaignId],
    );
    expect(injected.rows.length).toBeGreaterThan(0);
    const seeds = new Set(
      (
        await loop.pool.query<{ task_id: string }>(
          `select task_id from pool_members where campaign_id = $1 and origin = 'seed'`,
          [loop.campaignId],
        )
      ).rows.map((r) => r.task_id),
    );
    for (const r of injected.rows) {
      expect(seeds.has(r.root_seed)).toBe(true);
      expect(r.depth).toBeGreaterThanOrEqual(1);
      expect(r.parents.length).toBeGreaterThan(0);
    }
    // Validated candidates carry their lineage: models, prompt hashes, triggering statistics.
    const lineage = await loop.pool.query<{ lineage: Record<string, unknown> }>(
      `select lineage from candidates where campaign_id = $1 and status in ('validated', 'injected') limit 1`,
      [loop.campaignId],
    );
    expect(lineage.rows[0]?.lineage).toMatchObject({
      synthesisId: expect.any(String),
      judgeVerdict: 'accept',
    });
    expect(Object.keys(lineage.rows[0]!.lineage.promptVersions as object)).toContain('plan');

    // The JSONL sink holds the active pool of the current version, one BFCL task per line.
    const file = `.stack/test-sink/${loop.campaignId}/current.jsonl`;
    expect(existsSync(file)).toBe(true);
    const lines = readFileSync(file, 'utf8').trim().split('\n');
    expect(lines.length).toBe((await loop.activeMembers()).length);
    expect(JSON.parse(lines[0]!)).toHaveProperty('ground_truth');

    // Pause stops planning; resume continues.
    const paused = (await h.executeUpdate('pause', { args: [{}] })) as { status: string };
    expect(paused.status).toBe('paused');
    await loop.trainStep(7);
    // Once the aggregator has closed step 7, a running campaign would plan it: paused, it must not.
    await waitUntil(
      async () =>
        (
          await loop.pool.query(
            `select 1 from events where type = 'StepAggregated' and payload->>'campaignId' = $1
                and (payload->>'step')::int = 7`,
            [loop.campaignId],
          )
        ).rowCount === 1,
      { what: 'the aggregator to close step 7', timeoutMs: 120_000 },
    );
    await staysFalse(async () => (await loop.status()).step !== 6, 1500, {
      what: 'the paused campaign left step 6',
      intervalMs: 100,
    });
    await h.executeUpdate('resume');
    await loop.waitPlanned(7);
    const stopped = await executeUpdateWithRetry<{ status: string }>(h as never, 'stop', [
      { reason: 'test' },
    ]);
    expect(stopped.status).toBe('stopped');
    await h.result();

    // RODS_RECORD_FIXTURES=<name> records replay fixtures (workflows/fixtures/<kind>-history.<name>.pb)
    // from this run: the campaign and a base synthesis that ran Augment. Older fixtures stay, so
    // histories recorded before a patch keep replaying.
    const fixture = process.env.RODS_RECORD_FIXTURES;
    if (fixture) {
      const synthesisId = (
        await loop.pool.query<{ synthesis_id: string }>(
          `select v.payload->>'synthesisId' as synthesis_id from events v
            where v.type = 'CandidateValidated' and v.payload->>'campaignId' = $1
              and exists (select 1 from events a where a.type = 'StageCompleted' and a.payload->>'stage' = 'augment'
                           and a.payload->>'synthesisId' like (v.payload->>'synthesisId') || '~%')
            limit 1`,
          [loop.campaignId],
        )
      ).rows[0]!.synthesis_id;
      mkdirSync(new URL('./fixtures/', import.meta.url), { recursive: true });
      for (const [kind, id] of [
        ['campaign', loop.workflowId],
        ['synthesis', synthesisId],
      ] as const) {
        const history = await loop.client.workflow.getHandle(id).fetchHistory();
        writeFileSync(
          new URL(`./fixtures/${kind}-history.${fixture}.pb`, import.meta.url),
          temporal.api.history.v1.History.encode(history).finish(),
        );
      }
    }
  }, 600_000);
});
