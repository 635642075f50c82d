// Creating a campaign: a config over MAX_CAMPAIGN_CONFIG_BYTES is refused with 422 before anything
// is registered (it would not fit a Temporal payload), and creating a registered campaign again
// starts its workflow when the earlier start failed. No worker runs on this file's task queue; the
// campaign workflows it starts are terminated at the end.
import { randomUUID } from 'node:crypto';
import { WorkflowNotFoundError } from '@temporalio/client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { MAX_CAMPAIGN_CONFIG_BYTES } from '../../domain/campaign-config.js';
import { workflowIds } from '../../domain/ids.js';
import { loadCampaign, registerCampaign } from '../../platform/store/campaigns.js';
import {
  type GatewayUnderTest,
  startGatewayUnderTest,
} from '../../test/support/gateway/gateway-under-test.js';

const TOKEN = `tok-${randomUUID()}`;
const taskQueue = `gateway-create-${randomUUID().slice(0, 8)}`;
let gateway: GatewayUnderTest;
const campaigns: string[] = [];

const newId = () => {
  const id = `gwc-${randomUUID().slice(0, 8)}`;
  campaigns.push(id);
  return id;
};
const create = (body: Record<string, unknown>) =>
  gateway.app.inject({
    method: 'POST',
    url: '/v1/campaigns',
    payload: body,
    headers: { authorization: `Bearer ${TOKEN}` },
  });
const describeWorkflow = (id: string) =>
  gateway.client.workflow.getHandle(workflowIds.campaign(id)).describe();

beforeAll(async () => {
  gateway = await startGatewayUnderTest({
    application: 'rods-gateway-create-test',
    tokens: [TOKEN],
    taskQueue,
  });
});

afterAll(async () => {
  for (const id of campaigns)
    await gateway?.client.workflow
      .getHandle(workflowIds.campaign(id))
      .terminate('test over')
      .catch(() => {});
  await gateway?.close(campaigns);
});

describe('POST /v1/campaigns', () => {
  it('refuses a config over the size limit with 422 naming limit and size, registering nothing', async () => {
    const id = newId();
    // Valid in every field, just large: generator.model has no length bound of its own.
    const config = { generator: { model: 'x'.repeat(MAX_CAMPAIGN_CONFIG_BYTES) } };
    const res = await create({ campaignId: id, config });
    expect(res.statusCode, res.body).toBe(422);
    const problem = res.json() as { detail: string; errors: { field: string; message: string }[] };
    expect(problem.detail).toContain(`limit is ${MAX_CAMPAIGN_CONFIG_BYTES} bytes`);
    expect(problem.errors).toEqual([
      expect.objectContaining({ field: 'config', message: expect.stringMatching(/is \d+ bytes/) }),
    ]);
    expect(await loadCampaign(gateway.db, id)).toBeUndefined();
    await expect(describeWorkflow(id)).rejects.toBeInstanceOf(WorkflowNotFoundError);
  });

  it('starts the missing workflow of a registered campaign; a duplicate or another config is 409', async () => {
    const id = newId();
    const config = { pool: { generatedCap: 7 } };
    await registerCampaign(gateway.db, { campaignId: id, config }); // as if the start had failed
    await expect(describeWorkflow(id)).rejects.toBeInstanceOf(WorkflowNotFoundError);

    const res = await create({ campaignId: id, config });
    expect(res.statusCode, res.body).toBe(201);
    expect(res.json()).toMatchObject({ campaignId: id, workflowId: workflowIds.campaign(id) });
    expect((await describeWorkflow(id)).status.name).toBe('RUNNING');

    // The workflow exists now: the same request again is a duplicate, as is another config.
    expect((await create({ campaignId: id, config })).statusCode).toBe(409);
    expect((await create({ campaignId: id, config: { pool: { generatedCap: 8 } } })).statusCode).toBe(409);
  });

  it('keeps 409 for another config even when the workflow is missing', async () => {
    const id = newId();
    await registerCampaign(gateway.db, { campaignId: id, config: { pool: { generatedCap: 7 } } });
    expect((await create({ campaignId: id, config: { pool: { generatedCap: 9 } } })).statusCode).toBe(409);
    await expect(describeWorkflow(id)).rejects.toBeInstanceOf(WorkflowNotFoundError);
  });
});
