// Starting a campaign: the one service behind `rods campaign start` and `POST /v1/campaigns`, so
// both apply the same checks in the same order. It runs in the caller's process, not in a worker
// (the worker bundles workflows/index.ts, which does not import this file).
import { type Client, WorkflowExecutionAlreadyStartedError } from '@temporalio/client';
import type pg from 'pg';
import { type CampaignConfig, refuseOperatorOnly } from '../domain/campaign-config.js';
import { workflowIds } from '../domain/ids.js';
import { campaignConfigOf } from '../platform/config/campaign-config.js';
import { isAsRegistered, loadCampaign, registerCampaign } from '../platform/store/campaigns.js';
import { workflowExists } from '../platform/temporal/connect.js';
import { campaignWorkflow } from './campaign.js';

/** A campaign of that id exists already (with another config, or with its workflow started). */
export class CampaignExistsError extends Error {
  override name = 'CampaignExistsError';
  constructor(readonly campaignId: string) {
    super(`campaign ${campaignId} already exists`);
  }
}

/** The config names a generator endpoint the operator did not configure. */
export class UnknownGeneratorEndpointError extends Error {
  override name = 'UnknownGeneratorEndpointError';
  constructor(
    readonly endpoint: string,
    readonly known: readonly string[],
  ) {
    super(
      `${JSON.stringify(endpoint)} is not among the operator's generator endpoints (${known.join(', ')})`,
    );
  }
}

export interface CampaignStarter {
  db: pg.Pool;
  temporal: Client;
  taskQueue: string;
  /** The operator's generator endpoint names; when given, a config naming another is refused. */
  generatorEndpoints?: readonly string[];
}

export interface StartCampaignRequest {
  campaignId: string;
  name?: string;
  /** The config as given (validated here: CampaignConfigError when it is not a new campaign's). */
  config: unknown;
  untilStep?: number;
  /** Who started it, recorded in CampaignStarted (`cli`, `gateway`). */
  actor: string;
}

export interface StartedCampaign {
  campaignId: string;
  workflowId: string;
  runId: string;
}

/**
 * The checks a new campaign's config passes (no I/O, so an entry point may run them before it
 * connects): valid, free of operator-only generator settings (CampaignConfigError), and naming one
 * of `generatorEndpoints` when those are given (UnknownGeneratorEndpointError).
 */
export function checkNewCampaignConfig(
  config: unknown,
  generatorEndpoints?: readonly string[],
): CampaignConfig {
  refuseOperatorOnly(config);
  const parsed = campaignConfigOf(config);
  if (generatorEndpoints && !generatorEndpoints.includes(parsed.generator.endpoint))
    throw new UnknownGeneratorEndpointError(parsed.generator.endpoint, generatorEndpoints);
  return parsed;
}

/**
 * Registers the campaign (CampaignStarted and its config version 1) and starts its workflow. A
 * campaign registered with the same config whose workflow never started (the start failed) is
 * started by the same request; any other existing campaign is CampaignExistsError.
 */
export async function startCampaign(
  deps: CampaignStarter,
  req: StartCampaignRequest,
): Promise<StartedCampaign> {
  checkNewCampaignConfig(req.config, deps.generatorEndpoints);
  const workflowId = workflowIds.campaign(req.campaignId);
  let registered = await loadCampaign(deps.db, req.campaignId);
  if (registered) {
    if (!isAsRegistered(registered, req.config)) throw new CampaignExistsError(req.campaignId);
    if (await workflowExists(deps.temporal, workflowId)) throw new CampaignExistsError(req.campaignId);
  } else {
    registered = await registerCampaign(deps.db, {
      campaignId: req.campaignId,
      name: req.name,
      config: req.config,
      actor: req.actor,
    });
  }
  try {
    const handle = await deps.temporal.workflow.start(campaignWorkflow, {
      taskQueue: deps.taskQueue,
      workflowId,
      args: [
        {
          campaignId: req.campaignId,
          // The config as recorded (with what a new campaign records explicitly).
          config: registered.rawConfig,
          ...(req.untilStep !== undefined ? { untilStep: req.untilStep } : {}),
        },
      ],
    });
    return { campaignId: req.campaignId, workflowId, runId: handle.firstExecutionRunId };
  } catch (e) {
    if (e instanceof WorkflowExecutionAlreadyStartedError) throw new CampaignExistsError(req.campaignId);
    throw e;
  }
}
