// What the route modules share: the stores, the limits and the gateway's one status Kafka part.
import type { Client } from '@temporalio/client';
import type pg from 'pg';
import type { StatusOptions } from '../../../analysis/status/campaign-status.js';
import type { StatusKafka } from '../../../analysis/status/kafka-shared.js';
import { type CampaignRow, loadCampaign } from '../../../platform/store/campaigns.js';
import type { ManifestQueue } from '../manifest-queue.js';
import { ProblemError } from '../problem.js';
import type { DirectPublisher } from '../publish.js';
import type { GatewayLimits, LongPolls } from '../request-limits.js';

export interface RouteContext {
  db: pg.Pool;
  temporal: Client;
  /** Task queue of the rods worker (campaign and ingestion workflows). */
  taskQueue: string;
  /** Topic the ingestion workflows publish to (default rods.rewards.v1). */
  rewardsTopic?: string;
  /**
   * Publishes new batches right after their commit (entry/gateway/publish.ts; give it the rewards
   * topic); absent, every batch goes through its ingestion workflow.
   */
  publisher?: DirectPublisher;
  /** The operator's generator endpoint names, when the gateway can read them: others are refused (422). */
  generatorEndpoints?: readonly string[];
  limits: GatewayLimits;
  longPolls: LongPolls;
  /** Checkpoint manifests being computed: a few at a time, one per campaign (entry/gateway/manifest-queue.ts). */
  manifests: ManifestQueue;
  /** Poll period of pool long-polls (default 250 ms). */
  pollMs: number;
  /** How long a status query may wait for a worker once one polls (default 5 s). */
  queryTimeoutMs: number;
  /** Where the campaign status looks for the relay and the aggregators (analysis/status/campaign-status.ts). */
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
