// The ingestion workflow: the fallback publisher of an accepted rollout batch (id:
// workflowIds.ingestion, domain/ids.ts). The gateway publishes a batch itself (entry/gateway/publish.ts)
// and starts this workflow only when that send fails, with a reuse policy that rejects
// duplicates, so a batch is published by one execution at a time; the gateway's reconciler,
// entry/gateway/reconcile.ts, starts it for a batch left unpublished (the gateway died, or that start
// failed) and again after a failed or terminated run, harmless since the activity and the event
// ids are idempotent. The batch itself stays in PostgreSQL (claim check); the workflow carries
// only its id.
import { proxyActivities } from '@temporalio/workflow';
import type { IngestionActivities, IngestionInput, IngestionResult } from '../activities/ingestion.js';
import { untilDone } from './activity-options.js';

export type { IngestionInput, IngestionResult };

// Publishing one batch takes well under a second; a worker killed mid-publish is noticed only
// when the attempt times out, so the timeout is short (a step waits for it) and retries are endless.
const act = proxyActivities<IngestionActivities>(untilDone('30 seconds'));

export async function ingestionWorkflow(input: IngestionInput): Promise<IngestionResult> {
  return act.publishRolloutBatch(input);
}
