// What the route modules share: the stores, the limits and the gateway's one status Kafka part.
import type { Client } from '@temporalio/client';
import type pg from 'pg';
import type { StatusOptions } from '../../../analysis/status/campaign-status.js';
import type { StatusKafka } from '../../../analysis/status/kafka-shared.js';
import { type CampaignRow, loadCampaign } from '../../../platform/store/campaigns.js';
import { ProblemError } from '../problem.js';
import type { DirectPublisher } from '../publish.js';
import type { GatewayLimits, LongPolls } from '../request-limits.js';

export interface RouteContext {
  db: pg.Pool;
  temporal: Client;
  taskQueue: string;
  rewardsTopic?: string;
  publisher?: DirectPublisher;
  generatorEndpoints?: readonly string[];
  limits: GatewayLimits;
  longPolls: LongPolls;
  /** Poll period of pool long-polls. */
  pollMs: number;
  queryTimeoutMs: number;
  status?: Pick<StatusOptions, 'relayName' | 'aggregatorGroup' | 'synthesisTimeoutMs'>;
  /** The one Kafka admin and dead-letter tail of the process, opened on the first status call. */
  statusKafka: () => StatusKafka;
}

/** The campaign, or a 404 problem naming it. */
export async function requireCampaign(db: pg.Pool, campaignId: string): Promise<CampaignRow> {
  const c = await loadCampaign(db, campaignId);
  if (!c)
    throw new ProblemError(
      404,
      `unknown campaign ${JSON.stringify(campaignId)}`,
      undefined,
      'unknown-campaign',
    );
  return c;
}
