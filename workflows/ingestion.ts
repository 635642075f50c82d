// The ingestion workflow: one per accepted rollout batch (id: workflowIds.ingestion, domain/ids.ts)
// (started by the gateway with a reuse policy that rejects duplicates, so a batch is published
// by one execution only). The batch itself stays in PostgreSQL (claim check); the workflow
// carries only its id.
import { proxyActivities } from '@temporalio/workflow';
import type { IngestionActivities, IngestionInput, IngestionResult } from '../activities/ingestion.js';

const act = proxyActivities<IngestionActivities>({
  startToCloseTimeout: '2 minutes',
  retry: { initialInterval: '1 second', maximumInterval: '30 seconds' },
});

export async function ingestionWorkflow(input: IngestionInput): Promise<IngestionResult> {
  return act.publishRolloutBatch(input);
}
