// Stopping a campaign is an event: CampaignStopped with its reason, the registry says stopped, the
// workflow completes, and the gateway refuses new rollout batches (409 campaign-stopped) while a
// batch it had accepted is still answered as the duplicate it is (before, a stop was no event, the
// registry stayed `running`, and batches kept being accepted for a campaign nothing counted).
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { bfclTaskId, workflowIds } from '../../domain/ids.js';
import { executeUpdateWithRetry, workflowEnd } from '../../platform/temporal/connect.js';
import {
  type GatewayWithWorker,
  startGatewayWithWorker,
} from '../../test/support/gateway/gateway-with-worker.js';
import { waitUntil } from '../../test/support/wait.js';

const TOKEN = `tok-${randomUUID()}`;
const campaignId = `stop-${randomUUID().slice(0, 8)}`;
const AUTH = { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json' };
let gw: GatewayWithWorker;

beforeAll(async () => {
  gw = await startGatewayWithWorker({ application: 'rods-stop-test', tokens: [TOKEN], name: 'gw-stop' });
}, 180_000);

afterAll(async () => {
  await gw?.close([workflowIds.campaign(campaignId)]);
});

const post = (step: number, body: Record<string, unknown>) =>
  fetch(`${gw.base}/v1/campaigns/${campaignId}/steps/${step}/rollouts`, {
    method: 'POST',
    headers: AUTH,
    body: JSON.stringify(body),
  });

describe('stopping a campaign', () => {
  it('records CampaignStopped with the reason, completes, and the gateway takes nothing new', async () => {
    const created = await fetch(`${gw.base}/v1/campaigns`, {
      method: 'POST',
      headers: AUTH,
      body: JSON.stringify({ campaignId, config: { seeds: { perCategory: 1 } } }),
    });
    expect(created.status).toBe(201);
    // The trainer reports once the pool is there (rewards for a task outside it are refused).
    await waitUntil(
      async () =>
        ((await gw.db.query('select 1 from pool_members where campaign_id = $1', [campaignId])).rowCount ??
          0) > 0,
      {
        what: 'the pool to be seeded',
        timeoutMs: 60_000,
        intervalMs: 200,
      },
    );
    const batch = {
      batchId: 'b1',
      policyVersion: 'p',
      groups: [{ taskId: 'multi_turn_base_0', rewards: [0.5] }],
    };
    expect((await post(1, batch)).status).toBe(202);

    const handle = gw.client.workflow.getHandle(workflowIds.campaign(campaignId));
    await executeUpdateWithRetry(handle, 'stop', [{ reason: 'ablation finished' }]);
    await waitUntil(
      async () => (await workflowEnd(gw.client, workflowIds.campaign(campaignId))) === 'completed',
      {
        what: 'the stopped campaign to complete',
        timeoutMs: 60_000,
        intervalMs: 200,
      },
    );
    const events = await gw.db.query<{ reason: string | null }>(
      `select payload->>'reason' as reason from events where type = 'CampaignStopped' and payload->>'campaignId' = $1`,
      [campaignId],
    );
    expect(events.rows).toEqual([{ reason: 'ablation finished' }]);
    const row = await gw.db.query<{ status: string }>('select status from campaigns where campaign_id = $1', [
      campaignId,
    ]);
    expect(row.rows[0]?.status).toBe('stopped');

    const refused = await post(2, { ...batch, batchId: 'b2', close: true });
    expect(refused.status).toBe(409);
    const problem = (await refused.json()) as { type: string; detail: string };
    expect(problem.type).toBe('urn:rods:problem:campaign-stopped');
    expect(problem.detail).toContain(`campaign ${campaignId} is stopped`);
    // What was accepted stays accepted: the same batch again is its duplicate.
    const again = await post(1, batch);
    expect(again.status).toBe(200);
    expect(((await again.json()) as { duplicate: boolean }).duplicate).toBe(true);
  }, 180_000);

  it('refuses rewards for a task never in the pool (422 naming it) and counts a BFCL id the pool delivered as its task', async () => {
    const id = `unknown-${randomUUID().slice(0, 8)}`;
    const created = await fetch(`${gw.base}/v1/campaigns`, {
      method: 'POST',
      headers: AUTH,
      body: JSON.stringify({ campaignId: id, config: { seeds: { perCategory: 1 } } }),
    });
    expect(created.status).toBe(201);
    await waitUntil(
      async () =>
        ((await gw.db.query('select 1 from pool_members where campaign_id = $1', [id])).rowCount ?? 0) > 0,
      { what: 'the pool to be seeded', timeoutMs: 60_000, intervalMs: 200 },
    );
    // A generated task of the pool, delivered to BFCL harnesses under a BFCL id.
    const generated = 'multi_turn_base_0~s7';
    await gw.db.query(
      `insert into pool_members (campaign_id, task_id, origin, category, task, task_hash, parents, root_seed, depth, added_step, added_version, bfcl_id)
       values ($1, $2, 'generated', 'base', '{}'::jsonb, 'h', array['multi_turn_base_0'], 'multi_turn_base_0', 1, 1, 2, $3)`,
      [id, generated, bfclTaskId(generated, 'base')],
    );
    const post = (step: number, body: Record<string, unknown>) =>
      fetch(`${gw.base}/v1/campaigns/${id}/steps/${step}/rollouts`, {
        method: 'POST',
        headers: AUTH,
        body: JSON.stringify(body),
      });
    const refused = await post(1, {
      batchId: 'b1',
      policyVersion: 'p',
      groups: [
        { taskId: 'multi_turn_base_0', rewards: [0.5] },
        { taskId: 'no-such-task', rewards: [0.5] },
      ],
    });
    expect(refused.status).toBe(422);
    const problem = (await refused.json()) as { type: string; detail: string; errors: { field: string }[] };
    expect(problem.type).toBe('urn:rods:problem:unknown-task');
    expect(problem.detail).toContain('"no-such-task"');
    expect(problem.errors.map((e) => e.field)).toEqual(['groups[1].taskId']);

    const accepted = await post(1, {
      batchId: 'b2',
      policyVersion: 'p',
      groups: [{ taskId: bfclTaskId(generated, 'base'), rewards: [0.5, 1] }],
      close: true,
    });
    expect(accepted.status).toBe(202);
    const stored = await gw.db.query<{ groups: string }>(
      `select c.body->>'groupsJson' as groups from ingestion_batches b join claim_checks c using (claim_id)
        where b.campaign_id = $1 and b.batch_id = 'b2'`,
      [id],
    );
    expect(JSON.parse(stored.rows[0]!.groups)).toEqual([{ rewards: [0.5, 1], taskId: generated }]);
    await gw.client.workflow
      .getHandle(workflowIds.campaign(id))
      .terminate('test over')
      .catch(() => {});
  }, 180_000);
});
