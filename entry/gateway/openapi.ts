// The gateway's OpenAPI 3.0 document, served at GET /openapi.json. Request bodies are generated
// from the zod schemas that validate them (entry/gateway/schemas.ts); parameters are written here
// with the bounds those schemas enforce (the batch cap is the gateway's own: one document per
// gateway); responses are written here. entry/gateway/openapi.int.test.ts sends every bound the
// served document declares to the routes, just inside and just outside.
import { z } from 'zod';
import { API_VERSION } from './api-version.js';
import { MAX_FIELD_ERRORS } from './problem.js';
import { DEFAULT_BODY_LIMIT, DEFAULT_LIMITS, type GatewayLimits } from './request-limits.js';
import {
  CampaignCreate,
  CheckpointReport,
  ID_PATTERN,
  MAX_SEED_LENGTH,
  MAX_STEP,
  MAX_WAIT_SECONDS,
  RolloutBatch,
} from './schemas.js';

const toSchema = (s: z.ZodType) => {
  const { $schema: _drop, ...rest } = z.toJSONSchema(s, {
    target: 'openapi-3.0',
    io: 'input',
    unrepresentable: 'any',
  }) as Record<string, unknown>;
  return rest;
};

const ref = (name: string) => ({ $ref: `#/components/schemas/${name}` });
const problemResponse = (description: string) => ({
  description,
  content: { 'application/problem+json': { schema: ref('Problem') } },
});
const json = (description: string, schema: unknown, headers?: Record<string, unknown>) => ({
  description,
  ...(headers ? { headers } : {}),
  content: { 'application/json': { schema } },
});
const idParam = (name: string, description: string) => ({
  name,
  in: 'path',
  required: true,
  description,
  schema: { type: 'string', pattern: ID_PATTERN.source },
});
const authErrors = {
  '401': problemResponse('missing or malformed bearer token'),
  '403': problemResponse(
    'unknown bearer token (forbidden), or the token lacks the scope (insufficient-scope; detail and requiredScopes name it)',
  ),
  '429': {
    ...problemResponse(
      'more requests than the per-token rate limit (rate-limited), or, for a pool long-poll, too many held by the token (too-many-long-polls)',
    ),
    headers: { 'Retry-After': { description: 'seconds to wait', schema: { type: 'integer' } } },
  },
};
/** The scopes any one of which grants an operation (`bearer` has no scope list in OpenAPI 3.0). */
const scopes = (...s: string[]) => ({ 'x-required-scopes': s });
const SECURITY = `Bearer tokens with scopes (entry/gateway/auth.ts), from the tokens file (RODS_GATEWAY_TOKENS_FILE): admin (every operation: creates and steers campaigns), read (status, pool and batches of every campaign), campaign:<id> (posts rollouts to that campaign, reads its status, pool and batches). x-required-scopes lists the scopes any one of which grants an operation; a token without one gets 403 insufficient-scope naming them. Each token is rate-limited (429 with Retry-After).`;
const etagHeader = {
  ETag: { description: 'the pool version, quoted: "<version>"', schema: { type: 'string' } },
};

const PoolTask = {
  type: 'object',
  required: ['taskId', 'origin', 'category', 'task'],
  properties: {
    taskId: { type: 'string', description: 'the rods task id: report rewards under it' },
    origin: { type: 'string', enum: ['seed', 'generated'] },
    category: { type: 'string' },
    task: {
      type: 'object',
      description:
        "the BFCL multi-turn task record as bfcl-eval's executor and checker take it: id is a BFCL id (multi_turn_<category>_<n>), rods_task_id the rods task id, ground_truth the possible answer",
      additionalProperties: true,
    },
  },
};

/**
 * The document of a gateway with these limits (the defaults for what is absent). Built anew on
 * each call: a gateway builds its own once (entry/gateway/routes/health.ts).
 */
export function openApiDocument(
  limits: Partial<Pick<GatewayLimits, 'maxBatchN'>> & { bodyLimit?: number } = {},
): Record<string, unknown> {
  const maxBatchN = limits.maxBatchN ?? DEFAULT_LIMITS.maxBatchN;
  // The body limit applies before any bound inside a body: an array's maxItems says what the
  // schema takes, the body limit what fits (all the largest arrays at once do not).
  const bodyNote = `at most ${limits.bodyLimit ?? DEFAULT_BODY_LIMIT} bytes (RODS_GATEWAY_BODY_LIMIT; 413 past it), checked before any bound inside the body`;
  const body = (schema: string) => ({
    required: true,
    description: `the body: ${bodyNote}`,
    content: { 'application/json': { schema: ref(schema) } },
  });
  return {
    openapi: '3.0.3',
    info: {
      title: 'rods gateway',
      version: API_VERSION,
      description: `The trainer-facing API of rods: campaigns, scored rollout batches (ingested exactly once into rods.rewards.v1) and the active training pool. Every error is RFC 9457 application/problem+json. Request bodies are ${bodyNote}. A path no operation has is a 404 (not-found), and a method a path does not declare a 405 (method-not-allowed, with Allow), whatever the token.`,
    },
    components: {
      securitySchemes: { bearer: { type: 'http', scheme: 'bearer', description: SECURITY } },
      schemas: {
        Problem: {
          type: 'object',
          required: ['type', 'title', 'status', 'detail'],
          properties: {
            type: { type: 'string', description: 'urn:rods:problem:<kind>' },
            title: { type: 'string' },
            status: { type: 'integer' },
            detail: { type: 'string' },
            errors: {
              type: 'array',
              items: {
                type: 'object',
                required: ['field', 'message'],
                properties: {
                  field: { type: 'string', description: 'e.g. groups[3].rewards[2]' },
                  message: { type: 'string' },
                },
              },
            },
            errorCount: {
              type: 'integer',
              description: `how many field errors there were, when errors lists only the first ${MAX_FIELD_ERRORS}`,
            },
          },
        },
        CampaignCreate: toSchema(CampaignCreate),
        RolloutBatch: toSchema(RolloutBatch),
        CheckpointReport: toSchema(CheckpointReport),
        CheckpointRecorded: {
          type: 'object',
          required: ['checkpointId', 'manifestRoot', 'tasks', 'groups', 'duplicate'],
          properties: {
            checkpointId: { type: 'string' },
            manifestRoot: {
              type: 'string',
              description: "Merkle root (SHA-256, hex) of the checkpoint's manifest",
            },
            tasks: { type: 'integer', description: 'tasks in the manifest' },
            groups: { type: 'integer', description: "reward groups the manifest's tasks were trained on" },
            duplicate: { type: 'boolean' },
          },
        },
        PoolTask,
        Pool: {
          type: 'object',
          required: ['campaignId', 'version', 'step', 'tasks'],
          properties: {
            campaignId: { type: 'string' },
            version: { type: 'integer' },
            step: { type: 'integer' },
            tasks: { type: 'array', items: ref('PoolTask') },
          },
        },
        Ingestion: {
          type: 'object',
          required: ['workflowId', 'groups', 'close', 'duplicate', 'published'],
          properties: {
            workflowId: {
              type: 'string',
              description:
                'ingest:<campaign>:<step>:<batchId>: the ingestion workflow that publishes the batch when the gateway did not (published: false); none runs for a batch the gateway published',
            },
            groups: { type: 'integer' },
            close: { type: 'boolean' },
            duplicate: { type: 'boolean' },
            published: {
              type: 'boolean',
              description:
                "the batch's records are on the rewards topic already; false: its ingestion workflow publishes them",
            },
          },
        },
      },
    },
    security: [{ bearer: [] }],
    paths: {
      '/healthz': {
        get: {
          summary: 'liveness',
          security: [],
          responses: { '200': json('up', { type: 'object', properties: { ok: { type: 'boolean' } } }) },
        },
      },
      '/readyz': {
        get: {
          summary: 'readiness: PostgreSQL answers',
          security: [],
          responses: {
            '200': json('ready', { type: 'object', properties: { ready: { type: 'boolean' } } }),
            '503': problemResponse('PostgreSQL is unreachable'),
          },
        },
      },
      '/openapi.json': {
        get: {
          summary: 'this document',
          security: [],
          responses: { '200': json('the OpenAPI document', { type: 'object' }) },
        },
      },
      '/v1/campaigns': {
        post: {
          summary: 'register a campaign and start its workflow (campaign-<id>)',
          ...scopes('admin'),
          requestBody: body('CampaignCreate'),
          responses: {
            '201': json('registered and started', {
              type: 'object',
              required: ['campaignId', 'workflowId', 'runId'],
              properties: {
                campaignId: { type: 'string' },
                workflowId: { type: 'string' },
                runId: { type: 'string' },
              },
            }),
            '400': problemResponse('malformed JSON'),
            ...authErrors,
            '409': problemResponse('the campaign exists'),
            '413': problemResponse('body over the size limit'),
            '415': problemResponse('the body is not application/json'),
            '422': problemResponse(
              'invalid campaign or config (errors name the fields, e.g. config.pool.generatedCap; ids and names without control characters or lone surrogates, config strings without U+0000 or lone surrogates; a generator URL, key or header, e.g. config.generator.apiKey: campaigns name an operator endpoint with config.generator.endpoint, and a name the gateway knows is not among the endpoints)',
            ),
          },
        },
      },
      '/v1/campaigns/{id}': {
        get: {
          summary:
            "a campaign's status and what holds it (analysis/status/README.md): the workflow's own status when a worker answers, else PostgreSQL's projections; never waits for a missing worker",
          ...scopes('read', 'campaign:{id}', 'admin'),
          parameters: [
            idParam('id', 'campaign id'),
            {
              name: 'holds',
              in: 'query',
              required: false,
              description:
                'false: leave out `holds` (oldest open step, unpublished batches, overdue syntheses, relay and aggregator lag, dead letters), for cheap polling',
              schema: { type: 'string', enum: ['true', 'false'], default: 'true' },
            },
          ],
          responses: {
            '200': json('status', {
              type: 'object',
              required: [
                'format',
                'campaignId',
                'name',
                'status',
                'source',
                'step',
                'poolVersion',
                'worker',
                'execution',
                'workflow',
                'workflowError',
                'pool',
                'holds',
                'errors',
              ],
              properties: {
                format: { type: 'string', description: 'rods.campaign-status/1' },
                campaignId: { type: 'string' },
                name: { type: 'string' },
                status: {
                  type: 'string',
                  description:
                    'seeding | running | paused | stopped (the workflow), completed | terminated | failed | ... (a closed workflow), no-workflow, or the registry status when the workflow did not answer',
                },
                source: { type: 'string', enum: ['workflow', 'workflow-result', 'projections'] },
                step: { type: 'integer', description: 'last planned step' },
                poolVersion: { type: 'integer' },
                worker: {
                  type: 'object',
                  additionalProperties: true,
                  description:
                    'present (a worker polled the task queue recently), taskQueue, pollers, answered, detail',
                },
                execution: {
                  type: 'object',
                  nullable: true,
                  additionalProperties: true,
                  description:
                    'workflowId, runId, status (RUNNING, COMPLETED, ...), taskQueue, historyLength, times',
                },
                workflow: {
                  type: 'object',
                  nullable: true,
                  additionalProperties: true,
                  description:
                    'the status query, or the result of a completed workflow (step, poolVersion, running syntheses, totals, config); null otherwise',
                },
                workflowError: {
                  type: 'string',
                  nullable: true,
                  description: 'why `workflow` is null',
                },
                holds: {
                  type: 'object',
                  nullable: true,
                  additionalProperties: true,
                  description: 'what holds the campaign (analysis/status/README.md); null with ?holds=false',
                },
                errors: {
                  type: 'object',
                  additionalProperties: { type: 'string' },
                  description: 'parts that could not be read, with the reason',
                },
                pool: {
                  type: 'object',
                  additionalProperties: true,
                  description:
                    'version, active members by origin and band, queue length, retired, pruned, candidates',
                },
              },
            }),
            ...authErrors,
            '404': problemResponse('unknown campaign'),
            '422': problemResponse('invalid campaign id or holds'),
          },
        },
      },
      '/v1/campaigns/{id}/steps/{step}/rollouts': {
        post: {
          summary:
            'ingest a batch of scored rollout groups (one RolloutGroupScored each; close: true also sends StepClosed with the step total). Idempotent per (campaign, step, batchId): the same body again is a 200 duplicate, another body under the same batchId a 409 batch-conflict.',
          ...scopes('campaign:{id}', 'admin'),
          parameters: [
            idParam('id', 'campaign id'),
            {
              name: 'step',
              in: 'path',
              required: true,
              description:
                "the training step: an open step, or a new one after the campaign's last closed step and at most ingestion.maxStepsAhead (default 16) past it",
              schema: { type: 'integer', minimum: 0, maximum: MAX_STEP },
            },
          ],
          requestBody: body('RolloutBatch'),
          responses: {
            '200': json('a duplicate of an accepted batch: nothing is published again', ref('Ingestion')),
            '202': json(
              'accepted and durable: published by the gateway before answering (published: true), else by its ingestion workflow',
              ref('Ingestion'),
            ),
            '400': problemResponse('malformed JSON'),
            ...authErrors,
            '404': problemResponse('unknown campaign'),
            '409': problemResponse(
              'the step is already closed (step-closed), or is a new step behind the last closed one (step-behind; step and lastClosedStep name them), or the batchId was accepted with another body (batch-conflict; batchId and step name it), or the campaign is stopped (campaign-stopped)',
            ),
            '413': problemResponse('body over the size limit'),
            '415': problemResponse('the body is not application/json'),
            '422': problemResponse(
              "invalid batch (errors name the field): rewards must be numbers in [0,1] (e.g. groups[3].rewards[2]), at most the campaign's rewards.maxRollouts per group (maxRollouts); ids and versions without control characters or lone surrogates; a new step at most the campaign's ingestion.maxStepsAhead past the last closed step, or 0 before any (step-out-of-window; field step, with lastClosedStep, maxStepsAhead, maxStep)",
            ),
            '503': problemResponse('recorded but not started: retry the same request'),
          },
        },
      },
      '/v1/campaigns/{id}/checkpoints': {
        post: {
          summary:
            "record a checkpoint the trainer saved (rods_client's adapters report each save after the step's report) with the Merkle root of its manifest: every task the policy was trained on up to the checkpoint's step along its chain of runs (`rods manifest`). Idempotent per checkpointId: the same report again is a 200 duplicate, another report under the same id a 409 checkpoint-conflict.",
          ...scopes('campaign:{id}', 'admin'),
          parameters: [idParam('id', 'campaign id')],
          requestBody: body('CheckpointReport'),
          responses: {
            '200': json('a duplicate of a recorded checkpoint', ref('CheckpointRecorded')),
            '201': json('recorded (CheckpointSaved)', ref('CheckpointRecorded')),
            '400': problemResponse('malformed JSON'),
            ...authErrors,
            '404': problemResponse('unknown campaign'),
            '409': problemResponse('the checkpoint id is recorded with another report (checkpoint-conflict)'),
            '413': problemResponse('body over the size limit'),
            '415': problemResponse('the body is not application/json'),
            '422': problemResponse(
              'invalid report (errors name the field), or resumedFrom names no recorded checkpoint of the campaign (unknown-checkpoint), or a trained task has no seeding or injection (invalid-checkpoint)',
            ),
            '503': {
              ...problemResponse(
                "the campaign has not closed every step up to the checkpoint's yet (checkpoint-ahead; step names it): retry after Retry-After",
              ),
              headers: { 'Retry-After': { description: 'seconds to wait', schema: { type: 'integer' } } },
            },
          },
        },
      },
      '/v1/campaigns/{id}/pool': {
        get: {
          summary: 'the active pool; ETag is the pool version; long-poll with wait and If-None-Match',
          ...scopes('read', 'campaign:{id}', 'admin'),
          parameters: [
            idParam('id', 'campaign id'),
            {
              name: 'wait',
              in: 'query',
              required: false,
              description:
                'seconds to wait for a version other than If-None-Match (then 304); a token holds at most RODS_GATEWAY_MAX_LONG_POLLS (default 32) such waits at once (429 too-many-long-polls)',
              schema: { type: 'number', minimum: 0, maximum: MAX_WAIT_SECONDS },
            },
            { name: 'If-None-Match', in: 'header', required: false, schema: { type: 'string' } },
          ],
          responses: {
            '200': json('the active pool', ref('Pool'), etagHeader),
            '304': { description: 'the pool version is still the one in If-None-Match', headers: etagHeader },
            ...authErrors,
            '404': problemResponse('unknown campaign'),
            '422': problemResponse('invalid wait'),
          },
        },
      },
      '/v1/campaigns/{id}/batch': {
        get: {
          summary:
            'n tasks sampled from the active pool with replacement (deterministic for a seed and pool version). The body stays under RODS_GATEWAY_MAX_BATCH_BYTES (default 16 MiB): when the draws do not fit, the first ones that do are answered (a prefix of the same seeded sample) with truncated: true, n the count answered and requested the count asked; ask again (another seed) for the rest.',
          ...scopes('read', 'campaign:{id}', 'admin'),
          parameters: [
            idParam('id', 'campaign id'),
            {
              name: 'n',
              in: 'query',
              required: true,
              description: `at most this gateway's RODS_GATEWAY_MAX_BATCH_N (default ${DEFAULT_LIMITS.maxBatchN}); 422 outside [1, maximum], with maxN`,
              schema: { type: 'integer', minimum: 1, maximum: maxBatchN },
            },
            {
              name: 'seed',
              in: 'query',
              required: false,
              description: 'the sample is deterministic for a seed and pool version (default: a random one)',
              schema: { type: 'string', minLength: 1, maxLength: MAX_SEED_LENGTH },
            },
          ],
          responses: {
            '200': json(
              'the sample',
              {
                type: 'object',
                required: ['campaignId', 'version', 'seed', 'n', 'requested', 'truncated', 'tasks'],
                properties: {
                  campaignId: { type: 'string' },
                  version: { type: 'integer' },
                  seed: { type: 'string' },
                  n: { type: 'integer', description: 'tasks answered' },
                  requested: { type: 'integer', description: 'tasks asked (n of the query)' },
                  truncated: {
                    type: 'boolean',
                    description: 'fewer than requested: the byte cap was reached',
                  },
                  maxBytes: { type: 'integer', description: 'the byte cap, when truncated' },
                  tasks: { type: 'array', items: ref('PoolTask') },
                },
              },
              etagHeader,
            ),
            ...authErrors,
            '404': problemResponse('unknown campaign'),
            '409': problemResponse('the active pool is empty'),
            '422': problemResponse('invalid n (or above the cap: maxN) or seed'),
          },
        },
      },
    },
  };
}
