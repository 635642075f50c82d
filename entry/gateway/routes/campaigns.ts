// Campaigns: start one (admin; the campaign service in workflows/start-campaign.ts) and read its
// status (a token that may read it; the projections answer when no worker does).
import type { FastifyInstance } from 'fastify';
import { campaignStatus } from '../../../analysis/status/campaign-status.js';
import { NewCampaignConfigSchema, redactCampaignConfig } from '../../../domain/campaign-config.js';
import {
  CampaignExistsError,
  startCampaign,
  UnknownGeneratorEndpointError,
} from '../../../workflows/start-campaign.js';
import { ACCESS } from '../access.js';
import { ProblemError, parseOr422 } from '../problem.js';
import { CampaignCreate, CampaignParams, CampaignStatusQuery } from '../schemas.js';
import { type RouteContext, requireCampaign } from './context.js';

export function registerCampaignRoutes(app: FastifyInstance, ctx: RouteContext): void {
  app.post('/v1/campaigns', ACCESS.admin, async (req, reply) => {
    const body = parseOr422(CampaignCreate, req.body, 'campaign');
    // Valid, and naming an operator endpoint instead of carrying a URL, key or header.
    parseOr422(NewCampaignConfigSchema, body.config, 'campaign config', 'config');
    try {
      const started = await startCampaign(
        {
          db: ctx.db,
          temporal: ctx.temporal,
          taskQueue: ctx.taskQueue,
          ...(ctx.generatorEndpoints ? { generatorEndpoints: ctx.generatorEndpoints } : {}),
        },
        {
          campaignId: body.campaignId,
          name: body.name,
          config: body.config,
          untilStep: body.untilStep,
          actor: 'gateway',
        },
      );
      return reply.code(201).send(started);
    } catch (e) {
      if (e instanceof CampaignExistsError)
        throw new ProblemError(409, e.message, undefined, 'campaign-exists');
      if (e instanceof UnknownGeneratorEndpointError)
        throw new ProblemError(422, `invalid campaign config: config.generator.endpoint: ${e.message}`, [
          { field: 'config.generator.endpoint', message: e.message },
        ]);
      throw e;
    }
  });

  app.get('/v1/campaigns/:id', ACCESS.campaignRead, async (req) => {
    const { id } = parseOr422(CampaignParams, req.params, 'path');
    const q = parseOr422(CampaignStatusQuery, req.query, 'query');
    // Never waits on a missing worker: the projections answer (analysis/status/campaign-status.ts).
    const r = await campaignStatus(
      { db: ctx.db, temporal: ctx.temporal, statusKafka: ctx.statusKafka() },
      id,
      {
        holds: q.holds !== 'false',
        queryTimeoutMs: ctx.queryTimeoutMs,
        rewardsTopic: ctx.rewardsTopic,
        ...ctx.status,
      },
    );
    if (!r) return requireCampaign(ctx.db, id);
    const workflowError = r.workflow ? null : (r.errors.query ?? r.errors.temporal ?? r.worker.detail);
    // A config recorded before endpoints existed may carry a generator URL or key: never shown.
    const workflow = r.workflow
      ? { ...r.workflow, config: redactCampaignConfig(r.workflow.config) }
      : r.workflow;
    return { ...r, workflow, workflowError };
  });
}
