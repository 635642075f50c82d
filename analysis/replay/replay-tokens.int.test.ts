// The cost ledger rebuilt from the events: a failed stage's tokens (StageFailed, recorded twice by
// a retried activity) count once live and once in the replay, and a replay schema made before a
// projection column existed (synthesis_tokens.failed, migration 0030) is rebuilt, not resumed.
import { randomUUID } from 'node:crypto';
import { afterAll, describe, expect, inject, it } from 'vitest';
import { workerEvent } from '../../activities/events.js';
import { eventIds, streams } from '../../domain/ids.js';
import { registerCampaign } from '../../platform/store/campaigns.js';
import { createPool } from '../../platform/store/db.js';
import { synthesisTokens } from '../../platform/store/pool/funnel.js';
import { recordEvents } from '../../platform/store/pool/projection.js';
import { replayCampaign, replaySchema } from './replay.js';

const endpoints = inject('endpoints');
const pool = createPool({ application: 'rods-replay-tokens-test', max: 2 });
const ownerPool = createPool({
  connectionString: endpoints.ownerDatabaseUrl ?? endpoints.databaseUrl,
  application: 'rods-replay-tokens-test-owner',
  max: 2,
});
const schemas: string[] = [];

afterAll(async () => {
  for (const s of schemas) await ownerPool.query(`drop schema if exists ${s} cascade`);
  await pool.end();
  await ownerPool.end();
});

describe('replay of the cost ledger', () => {
  it('counts a failed stage’s tokens once, as live, and rebuilds a replay schema without the failed column', async () => {
    const campaignId = `tokens-${randomUUID().slice(0, 8)}`;
    const schema = replaySchema(campaignId);
    schemas.push(schema);
    await registerCampaign(pool, { campaignId });
    const S = `${campaignId}:1:s1`;
    const at = { campaignId, synthesisId: S, occurredAt: Date.now() };
    const events = [
      workerEvent('SynthesisStarted', eventIds.synthesisStarted(S), {
        ...at,
        seedTaskId: 's1',
        selectionEventId: randomUUID(),
        generatorModel: 'gen',
      }),
      workerEvent('StageCompleted', eventIds.stageCompleted(S, 'plan', 1), {
        ...at,
        stage: 'plan',
        attempt: 1,
        model: 'gen',
        promptVersionHash: 'a'.repeat(64),
        outputHash: 'o'.repeat(64),
        promptTokens: 100,
        completionTokens: 20,
      }),
      workerEvent('StageFailed', eventIds.stageFailed(S, 'params', 1), {
        ...at,
        stage: 'execute',
        attempt: 1,
        model: 'gen',
        promptVersionHash: 'b'.repeat(64),
        reason: 'generator output for stage params (gen) failed validation 3 time(s): the reply is empty',
        promptTokens: 900,
        completionTokens: 4096,
      }),
    ];
    for (const e of events) await recordEvents(pool, streams.synthesis(S), [e]);
    // the activity retried after its record committed
    expect((await recordEvents(pool, streams.synthesis(S), [events[2]!])).appended).toBe(false);
    const ledger = [
      { stage: 'execute', stages: 0, failed: 1, promptTokens: 900, completionTokens: 4096 },
      { stage: 'plan', stages: 1, failed: 0, promptTokens: 100, completionTokens: 20 },
    ];
    expect(await synthesisTokens(pool, campaignId)).toEqual(ledger);

    const first = await replayCampaign(ownerPool, { campaignId, fresh: true });
    expect(first.tables.find((t) => t.table === 'synthesis_tokens')).toMatchObject({
      equal: true,
      liveRows: 2,
      replayRows: 2,
    });
    expect(first.equal).toBe(true);

    // A replay schema from before migration 0030: resuming it would fail on the missing column.
    await ownerPool.query(`alter table ${schema}.synthesis_tokens drop column failed`);
    const again = await replayCampaign(ownerPool, { campaignId });
    expect(again.resumedFrom).toBe(0);
    expect(again.equal).toBe(true);
    // And a current one resumes where it stopped.
    const resumed = await replayCampaign(ownerPool, { campaignId });
    expect(resumed.resumedFrom).toBe(again.events);
    expect(resumed.equal).toBe(true);
  });
});
