// Steps close in the trainer's order even when a later step's records are all counted first: after
// a gateway outage a trainer sends its queued steps at once, and step s+1's records can reach the
// aggregator before step s's (they sit on other partitions). Step s+1 waits while step s has a
// closing batch accepted by the gateway; an earlier step with none (a missing step) holds nothing.
import { randomUUID } from 'node:crypto';
import { afterAll, describe, expect, it } from 'vitest';
import { createIngestionActivities } from '../../activities/ingestion.js';
import { streams } from '../../domain/ids.js';
import { createPool } from '../../platform/store/db.js';
import { readStream } from '../../platform/store/events/event-store.js';
import { CLAIM_CHECK_STEPS } from '../../platform/store/steps/batches.js';
import { closeReadySteps } from './steps.js';

const pool = createPool({ application: 'rods-steps-test', max: 4 });
afterAll(() => pool.end());

/** The aggregator's view of a step: declared with `groups` groups, all of them counted. */
async function counted(campaign: string, step: number, groups: number) {
  await pool.query('insert into steps (campaign_id, step, declared_groups) values ($1, $2, $3)', [
    campaign,
    step,
    groups,
  ]);
  await pool.query(
    `insert into step_progress (campaign_id, step, topic, partition, groups_applied)
     values ($1, $2, 'rods.rewards.v1', 0, $3)`,
    [campaign, step, groups],
  );
}

/** The gateway's view: the closing batch of a step accepted (its records not yet counted). */
async function accepted(campaign: string, step: number, status = 'published') {
  const claim = `claim-${randomUUID()}`;
  await pool.query(`insert into claim_checks (claim_id, kind, body) values ($1, 'rollout-batch', '{}')`, [
    claim,
  ]);
  await pool.query(
    `insert into ingestion_batches (campaign_id, step, batch_id, groups, closes, status, claim_id, workflow_id)
     values ($1, $2, $3, 2, true, $5, $4, 'wf')`,
    [campaign, step, `b-${step}`, claim, status],
  );
  return claim;
}

// Another test file's aggregator may be running: its sweep closes every campaign's ready steps,
// these ones too. So the tests assert what the steps stream holds, not which call closed a step.
const aggregatedSteps = async (campaign: string) =>
  (await readStream(pool, streams.steps(campaign)))
    .filter((e) => e.type === 'StepAggregated')
    .map((e) => Number((e.payload as { step: number }).step));

describe('closing steps in order', () => {
  it('a later step whose records were all counted waits for an earlier step the gateway accepted', async () => {
    const campaign = `order-${randomUUID().slice(0, 8)}`;
    await counted(campaign, 1, 2);
    await accepted(campaign, 1);
    await accepted(campaign, 2);
    await accepted(campaign, 3);
    await counted(campaign, 3, 2); // step 3 complete, step 2's records not read yet
    await closeReadySteps(pool, [campaign]);
    expect(await closeReadySteps(pool, [campaign])).toEqual([]);
    expect(await aggregatedSteps(campaign)).toEqual([1]);

    await counted(campaign, 2, 2);
    await closeReadySteps(pool, [campaign], Date.now, 'closer-a');
    expect(await aggregatedSteps(campaign)).toEqual([1, 2, 3]);
    // The closing instance is named in the metadata of what it closed (here steps 2 and 3,
    // unless another file's sweep got there first: then that instance is named).
    const closers = (await readStream(pool, streams.steps(campaign)))
      .filter((e) => e.type === 'StepAggregated' && Number((e.payload as { step: number }).step) > 1)
      .map((e) => e.metadata.closedBy);
    expect(closers).toHaveLength(2);
    for (const c of closers) expect(typeof c === 'string' && c.length > 0).toBe(true);
  });

  it('an earlier step with no closing batch (never sent) does not hold later steps', async () => {
    const campaign = `order-${randomUUID().slice(0, 8)}`;
    await counted(campaign, 1, 2);
    await counted(campaign, 3, 2); // step 2 never sent: missing-step.ts decides about it
    await closeReadySteps(pool, [campaign]);
    expect(await aggregatedSteps(campaign)).toEqual([1, 3]);
  });

  it('empties the claim checks of published batches CLAIM_CHECK_STEPS steps behind the step it closes, and a repeat of their publication is a no-op', async () => {
    const campaign = `prune-${randomUUID().slice(0, 8)}`;
    const claims: string[] = [];
    const last = CLAIM_CHECK_STEPS + 3;
    for (let step = 1; step <= last; step++) {
      // Step 2's batch is still unpublished (its workflow has not run): its body stays.
      claims.push(await accepted(campaign, step, step === 2 ? 'accepted' : 'published'));
      await counted(campaign, step, 2);
    }
    await closeReadySteps(pool, [campaign]);
    expect(await aggregatedSteps(campaign)).toEqual(Array.from({ length: last }, (_, i) => i + 1));
    const { rows } = await pool.query<{ step: number; pruned: boolean }>(
      `select b.step::int, c.body is null and c.pruned_at is not null as pruned
         from ingestion_batches b join claim_checks c using (claim_id) where b.campaign_id = $1 order by 1`,
      [campaign],
    );
    expect(rows.filter((r) => r.pruned).map((r) => r.step)).toEqual([1, 3]);
    // The ingestion workflow run again for a batch whose body is gone: its publication stands.
    const again = await createIngestionActivities({ pool }).publishRolloutBatch({ claimId: claims[0]! });
    expect(again).toMatchObject({ campaignId: campaign, step: 1, batchId: 'b-1', groups: 2, published: 0 });
  });
});
