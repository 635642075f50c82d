// Closing training steps (store/watermark.ts reads the watermark they advance). A step closes
// once the groups accounted for it (applied + rejected, summed over partitions) reach the count
// its StepClosed declared; closing appends one StepAggregated to the campaign's steps stream. Any
// aggregator instance may close a step: a per-campaign advisory lock and the closed_at flag make
// it happen once.
import type pg from 'pg';
import { defaultRegistry } from '../codec/registry.js';
import { BANDS } from '../domain/band.js';
import { streams } from '../domain/ids.js';
import { bandSummary, boundaryVarianceRatio, emptyTally, type StepTally } from '../domain/step-tally.js';
import { append } from '../store/event-store.js';
import { stepAggregated } from './events.js';

interface ProgressRow {
  applied: number;
  rejected: number;
  hard_tasks: number;
  hard_var_sum: number;
  boundary_tasks: number;
  boundary_var_sum: number;
  mastered_tasks: number;
  mastered_var_sum: number;
}

async function progress(
  db: pg.PoolClient,
  campaignId: string,
  step: number,
): Promise<{ rejected: number; tally: StepTally }> {
  const { rows } = await db.query<ProgressRow>(
    `select coalesce(sum(groups_applied), 0)::bigint as applied, coalesce(sum(groups_rejected), 0)::bigint as rejected,
            coalesce(sum(hard_tasks), 0)::bigint as hard_tasks, coalesce(sum(hard_var_sum), 0) as hard_var_sum,
            coalesce(sum(boundary_tasks), 0)::bigint as boundary_tasks, coalesce(sum(boundary_var_sum), 0) as boundary_var_sum,
            coalesce(sum(mastered_tasks), 0)::bigint as mastered_tasks, coalesce(sum(mastered_var_sum), 0) as mastered_var_sum
       from step_progress where campaign_id = $1 and step = $2`,
    [campaignId, step],
  );
  const r = rows[0]!;
  const tally = emptyTally();
  tally.groups = r.applied;
  tally.hard = { tasks: r.hard_tasks, varianceSum: r.hard_var_sum };
  tally.boundary = { tasks: r.boundary_tasks, varianceSum: r.boundary_var_sum };
  tally.mastered = { tasks: r.mastered_tasks, varianceSum: r.mastered_var_sum };
  return { rejected: r.rejected, tally };
}

/**
 * Closes the campaigns' complete steps, in step order: a step closes only after every earlier
 * step of its campaign the trainer closed has (so StepAggregated events and the watermark advance
 * in order), even when a later step's records are all counted first.
 * With no campaigns given, looks at every campaign with an open step. Returns the closed steps.
 */
export async function closeReadySteps(
  pool: pg.Pool,
  campaignIds?: string[],
  now: () => number = Date.now,
): Promise<{ campaignId: string; step: number }[]> {
  const ids =
    campaignIds ??
    (
      await pool.query<{ campaign_id: string }>(
        'select distinct campaign_id from steps where closed_at is null',
      )
    ).rows.map((r) => r.campaign_id);
  const closed: { campaignId: string; step: number }[] = [];
  for (const campaignId of new Set(ids)) {
    const open = await pool.query<{ step: number }>(
      'select step from steps where campaign_id = $1 and closed_at is null order by step',
      [campaignId],
    );
    for (const { step } of open.rows) {
      const r = await tryClose(pool, campaignId, step, now);
      if (r === 'incomplete') break;
      if (r === 'closed') closed.push({ campaignId, step });
    }
  }
  return closed;
}

/**
 * Whether an earlier, unclosed step of the campaign has its closing batch accepted by the gateway:
 * it is on its way (its records may sit on a partition that lags), so this step waits for it.
 * An earlier step with no closing batch is a missing one (missing-step.ts) and holds nothing here.
 */
async function earlierStepComing(client: pg.PoolClient, campaignId: string, step: number): Promise<boolean> {
  const { rows } = await client.query<{ coming: boolean }>(
    `select exists (
       select 1 from ingestion_batches b
        where b.campaign_id = $1 and b.closes and b.step < $2
          and b.step > coalesce((select max(step) from steps
                                  where campaign_id = $1 and step < $2 and closed_at is not null), -1)
          and not exists (select 1 from steps s
                           where s.campaign_id = $1 and s.step = b.step and s.closed_at is not null)
     ) as coming`,
    [campaignId, step],
  );
  return rows[0]!.coming;
}

/** Closes one step if it is complete (another instance may have closed it meanwhile). */
async function tryClose(
  pool: pg.Pool,
  campaignId: string,
  step: number,
  now: () => number,
): Promise<'closed' | 'already' | 'incomplete'> {
  const registry = defaultRegistry();
  const client = await pool.connect();
  try {
    await client.query('begin');
    await client.query('select pg_advisory_xact_lock(hashtextextended($1, 0))', [`rods-steps:${campaignId}`]);
    const s = await client.query<{ declared_groups: number | null; closed_at: Date | null }>(
      'select declared_groups, closed_at from steps where campaign_id = $1 and step = $2',
      [campaignId, step],
    );
    const row = s.rows[0];
    if (row?.closed_at) {
      await client.query('rollback');
      return 'already';
    }
    if (!row || row.declared_groups === null) {
      await client.query('rollback');
      return 'incomplete';
    }
    if (await earlierStepComing(client, campaignId, step)) {
      await client.query('rollback');
      return 'incomplete';
    }
    const { rejected, tally } = await progress(client, campaignId, step);
    if (tally.groups + rejected < row.declared_groups) {
      await client.query('rollback');
      return 'incomplete';
    }
    await append(client, streams.steps(campaignId), 'any', [
      stepAggregated(registry, campaignId, step, tally, now),
    ]);
    const summary = {
      groupCount: tally.groups,
      rejected,
      declared: row.declared_groups,
      ...Object.fromEntries(BANDS.map((b) => [b, bandSummary(tally[b])])),
      boundaryVarianceRatio: boundaryVarianceRatio(tally),
    };
    await client.query(
      'update steps set closed_at = now(), summary = $3 where campaign_id = $1 and step = $2',
      [campaignId, step, JSON.stringify(summary)],
    );
    await client.query('commit');
    return 'closed';
  } catch (e) {
    await client.query('rollback').catch(() => {});
    throw e;
  } finally {
    client.release();
  }
}
