// Generator URLs, keys and headers are the operator's: POST /v1/campaigns refuses a config
// carrying one with 422 naming the field (registering nothing), refuses an endpoint name the
// operator does not have when the gateway knows the endpoints, and GET /v1/campaigns/:id never
// shows the URL or key of a config recorded before endpoints existed.
import { randomUUID } from 'node:crypto';
import { fileURLToPath } from 'node:url';
import type { Client } from '@temporalio/client';
import { bundleWorkflowCode, Runtime } from '@temporalio/worker';
import type { FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { GeneratorEndpoints } from '../../activities/llm/endpoints.js';
import { createRodsWorker } from '../../activities/worker.js';
import { workflowIds } from '../../domain/ids.js';
import { loadCampaign, registerCampaign } from '../../platform/store/campaigns.js';
import { createPool, type Pool } from '../../platform/store/db.js';
import { installWorkerRuntime, temporalClient } from '../../platform/temporal/connect.js';
import { waitUntil } from '../../test/support/wait.js';
import { campaignWorkflow } from '../../workflows/campaign.js';
import { TokenSet } from './auth.js';
import { buildGateway } from './server.js';

const TOKEN = `tok-${randomUUID()}`;
const KEY = `sk-canary-${randomUUID()}`;
const taskQueue = `gateway-secrets-${randomUUID().slice(0, 8)}`;
let db: Pool;
let temporal: { client: Client; close: () => Promise<void> };
let app: FastifyInstance;
let knowing: FastifyInstance;
const campaigns: string[] = [];

const newId = () => {
  const id = `gws-${randomUUID().slice(0, 8)}`;
  campaigns.push(id);
  return id;
};
const create = (gw: FastifyInstance, campaignId: string, config: unknown) =>
  gw.inject({
    method: 'POST',
    url: '/v1/campaigns',
    payload: { campaignId, config },
    headers: { authorization: `Bearer ${TOKEN}` },
  });

beforeAll(async () => {
  db = createPool({ application: 'rods-gateway-secrets-test', max: 4 });
  temporal = await temporalClient();
  const base = { db, temporal: temporal.client, tokens: new TokenSet([TOKEN]), taskQueue };
  app = buildGateway(base);
  knowing = buildGateway({ ...base, generatorEndpoints: ['default', 'vllm-b'] });
  await app.ready();
  await knowing.ready();
});

afterAll(async () => {
  for (const id of campaigns)
    await temporal?.client.workflow
      .getHandle(workflowIds.campaign(id))
      .terminate('test over')
      .catch(() => {});
  await app?.close();
  await knowing?.close();
  await temporal?.close();
  await db?.end();
});

describe('POST /v1/campaigns with operator-only generator settings', () => {
  it.each([
    ['apiKey', KEY],
    ['headers', { authorization: `Bearer ${KEY}` }],
    ['baseUrl', 'http://127.0.0.1:7400/v1'],
    ['apiKeyEnv', 'DATABASE_URL'],
  ])('refuses generator.%s with 422 naming the field, registering nothing', async (field, value) => {
    const id = newId();
    const res = await create(app, id, { generator: { model: 'm', [field]: value } });
    expect(res.statusCode, res.body).toBe(422);
    const problem = res.json() as { errors: { field: string; message: string }[] };
    expect(problem.errors.map((e) => e.field)).toEqual([`config.generator.${field}`]);
    expect(problem.errors[0]!.message).toContain('name one with generator.endpoint');
    expect(res.body).not.toContain(KEY);
    expect(await loadCampaign(db, id)).toBeUndefined();
  });

  it('refuses an endpoint name the operator does not have, when the gateway knows the endpoints', async () => {
    const id = newId();
    const res = await create(knowing, id, { generator: { endpoint: 'elsewhere' } });
    expect(res.statusCode, res.body).toBe(422);
    expect((res.json() as { errors: { field: string; message: string }[] }).errors).toEqual([
      {
        field: 'config.generator.endpoint',
        message: `"elsewhere" is not among the operator's generator endpoints (default, vllm-b)`,
      },
    ]);
    expect(await loadCampaign(db, id)).toBeUndefined();
    // A known name is accepted (201); the gateway that does not know the endpoints accepts any name.
    expect((await create(knowing, newId(), { generator: { endpoint: 'vllm-b' } })).statusCode).toBe(201);
    expect((await create(app, newId(), { generator: { endpoint: 'elsewhere' } })).statusCode).toBe(201);
  });
});

describe('GET /v1/campaigns/:id of a config recorded before endpoints existed', () => {
  it('answers with the endpoint name only; the workflow refuses a reconfiguration carrying a header', async () => {
    await installWorkerRuntime('WARN');
    const workflowBundle = await bundleWorkflowCode({
      logger: Runtime.instance().logger,
      workflowsPath: fileURLToPath(new URL('../../workflows/index.ts', import.meta.url)),
    });
    const id = newId();
    // As recorded by an older version: URL, key and headers in the config (straight to the store).
    const config = {
      seeds: { perCategory: 1 },
      generator: { baseUrl: 'http://old-vllm:8000/v1', apiKey: KEY, headers: { 'x-k': KEY }, model: 'm' },
    };
    await registerCampaign(db, { campaignId: id, config });
    const w = await createRodsWorker({
      pool: db,
      taskQueue,
      workflowBundle,
      generatorEndpoints: GeneratorEndpoints.of({ default: { baseUrl: 'http://127.0.0.1:9/v1' } }),
    });
    const running = w.worker.run();
    try {
      await temporal.client.workflow.start(campaignWorkflow, {
        taskQueue,
        workflowId: workflowIds.campaign(id),
        args: [{ campaignId: id, config }],
      });
      const body = await waitUntil(
        async () => {
          const res = await app.inject({
            method: 'GET',
            url: `/v1/campaigns/${id}?holds=false`,
            headers: { authorization: `Bearer ${TOKEN}` },
          });
          const b = res.json() as { workflow: { config: { generator: Record<string, unknown> } } | null };
          return res.statusCode === 200 && b.workflow ? { text: res.body, b } : undefined;
        },
        { what: `the status of ${id} from its workflow`, timeoutMs: 60_000, intervalMs: 250 },
      );
      expect(body.b.workflow!.config.generator).toEqual({ model: 'm' });
      expect(body.text).not.toContain(KEY);
      expect(body.text).not.toContain('old-vllm');
      // The workflow's reconfigure validator refuses a key (whatever client sends the update),
      // and nothing is recorded for it.
      const handle = temporal.client.workflow.getHandle(workflowIds.campaign(id));
      const refused = await handle
        .executeUpdate('reconfigure', {
          args: [{ config: { generator: { model: 'n', headers: { a: KEY } } } }],
        })
        .catch((e: Error & { cause?: Error }) => e.cause?.message ?? e.message);
      expect(refused).toContain('generator.headers is not a campaign setting');
      const { rowCount } = await db.query(
        `select 1 from events where type = 'CampaignReconfigured' and payload->>'campaignId' = $1`,
        [id],
      );
      expect(rowCount).toBe(0);
    } finally {
      await temporal.client.workflow
        .getHandle(workflowIds.campaign(id))
        .terminate('test over')
        .catch(() => {});
      w.worker.shutdown();
      await running;
      await w.close();
    }
  }, 180_000);
});
