// Closing training steps (platform/store/steps/watermark.ts reads the watermark they advance). A step closes
// once the groups accounted for it (applied + rejected, summed over partitions) reach the count
// its StepClosed declared; closing appends one StepAggregated to the campaign's steps stream. Any
// aggregator instance may close a step: a per-campaign advisory lock and the closed flag make
// it happen once. The rows are platform/store/steps/close.ts's.
import type pg from 'pg';
import { BANDS } from '../../domain/band.js';
import { streams } from '../../domain/ids.js';
import { bandSummary, boundaryVarianceRatio } from '../../domain/step-tally.js';
import { defaultRegistry } from '../../platform/codec/registry.js';
import { inTransaction } from '../../platform/store/db.js';
import { append } from '../../platform/store/events/event-store.js';
import { CLAIM_CHECK_STEPS, pruneClaimChecks } from '../../platform/store/steps/batches.js';
import {
  campaignsWithOpenSteps,
  earlierStepComing,
  lockCampaignSteps,
  markStepClosed,
  openSteps,
  stepCounts,
  stepRow,
} from '../../platform/store/steps/close.js';
import { stepAggregated } from './events.js';

/**
 * Closes the campaigns' complete steps, in step order: a step closes only after every earlier
 * step of its campaign the trainer closed has (so StepAggregated events and the watermark advance
 * in order), even when a later step's records are all counted first.
 * With no campaigns given, looks at every campaign with an open step. Returns the closed steps.
 * `closedBy` names the closing instance in each StepAggregated's metadata: any instance's sweep
 * may close another's ready step, and the metadata says which one did.
 */
export async function closeReadySteps(
  pool: pg.Pool,
  campaignIds?: string[],
  now: () => number = Date.now,
  closedBy?: string,
): Promise<{ campaignId: string; step: number }[]> {
  const ids = campaignIds ?? (await campaignsWithOpenSteps(pool));
  const closed: { campaignId: string; step: number }[] = [];
  for (const campaignId of new Set(ids)) {
    for (const step of await openSteps(pool, campaignId)) {
      const r = await tryClose(pool, campaignId, step, now, closedBy);
      if (r === 'incomplete') break;
      if (r === 'closed') closed.push({ campaignId, step });
    }
  }
  return closed;
}

/** Closes one step if it is complete (another instance may have closed it meanwhile). */
async function tryClose(
  pool: pg.Pool,
  campaignId: string,
  step: number,
  now: () => number,
  closedBy: string | undefined,
): Promise<'closed' | 'already' | 'incomplete'> {
  const registry = defaultRegistry();
  // A step found not closable yet commits nothing: the transaction only held the step lock.
  return inTransaction(pool, async (client) => {
    await lockCampaignSteps(client, campaignId);
    const row = await stepRow(client, campaignId, step);
    if (row?.closed) return 'already';
    if (!row || row.declared === null) return 'incomplete';
    if (await earlierStepComing(client, campaignId, step)) return 'incomplete';
    const { rejected, tally } = await stepCounts(client, campaignId, step);
    if (tally.groups + rejected < row.declared) return 'incomplete';
    await append(client, streams.steps(campaignId), 'any', [
      stepAggregated(registry, campaignId, step, tally, now, closedBy),
    ]);
    const summary = {
      groupCount: tally.groups,
      rejected,
      declared: row.declared,
      ...Object.fromEntries(BANDS.map((b) => [b, bandSummary(tally[b])])),
      boundaryVarianceRatio: boundaryVarianceRatio(tally),
    };
    await markStepClosed(client, campaignId, step, summary);
    // The batches of the step CLAIM_CHECK_STEPS back are published and counted: their bodies go.
    if (step > CLAIM_CHECK_STEPS) await pruneClaimChecks(client, campaignId, step - CLAIM_CHECK_STEPS);
    return 'closed';
  });
}
