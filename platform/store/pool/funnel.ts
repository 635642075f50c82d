// The synthesis funnel of a campaign (migrations/0017_synthesis_funnel.sql): the pool projection
// counts the funnel's events as it records them, so the funnel reads a handful of rows per campaign
// instead of every event of its history. Marks make a run count once per stage: one row per run
// and stage with what completed there (without a model, and the prompt hashes of model calls).
// Counts are kept per event type, stage and key; a stage's model calls are counted per set of
// prompt hashes, so that the read can tell repairs (the config-patch prompt's hash, which is
// platform configuration and not in the log) from other model calls exactly, for any hash.
import type pg from 'pg';
import type { Queryable } from '../events/event-store.js';

/** The event types counted as they come (no distinct runs). */
const COUNTED = new Set(['SeedSelected', 'CandidateValidated', 'CandidateRejected', 'TaskInjected']);

/** An Augment variant's synthesis id: its base run's id with this suffix. */
const VARIANT_SUFFIX = /~(miss_func|miss_param)$/;

/** Moves a count by one; a count that reaches 0 leaves no row (as the migration's backfill). */
async function bump(
  c: pg.ClientBase,
  k: { campaignId: string; type: string; stage: string; key: string; hashes?: string[] },
  by: 1 | -1,
): Promise<void> {
  const params = [k.campaignId, k.type, k.stage, k.key, k.hashes ?? []];
  const where = 'campaign_id = $1 and type = $2 and stage = $3 and key = $4 and hashes = $5::text[]';
  if (by === 1) {
    await c.query(
      `insert into synthesis_funnel_counts as f (campaign_id, type, stage, key, hashes, n)
       values ($1, $2, $3, $4, $5::text[], 1)
       on conflict (campaign_id, type, stage, key, hashes) do update set n = f.n + 1`,
      params,
    );
    return;
  }
  await c.query(`update synthesis_funnel_counts set n = n - 1 where ${where}`, params);
  await c.query(`delete from synthesis_funnel_counts where ${where} and n <= 0`, params);
}

/**
 * The run a stage completion counts for: its own synthesis id, or for an Augment variant (no
 * SynthesisStarted of its own) its base run's. A run's SynthesisStarted is the first event of its
 * stream, so it is marked before any of its stages.
 */
async function runOf(c: pg.ClientBase, campaignId: string, synthesisId: string): Promise<string> {
  if (!VARIANT_SUFFIX.test(synthesisId)) return synthesisId;
  // A seed task id may itself end in ~miss_param: such a run has its own start.
  const own = await c.query(
    `select 1 from synthesis_funnel_marks where campaign_id = $1 and run_id = $2 and stage = ''`,
    [campaignId, synthesisId],
  );
  return own.rowCount ? synthesisId : synthesisId.replace(VARIANT_SUFFIX, '');
}

/** A StageCompleted: marks its run's stage, and counts the run there the first time per kind. */
async function markStage(
  c: pg.ClientBase,
  campaignId: string,
  p: { synthesisId: string; stage: string; model?: unknown; promptVersionHash?: unknown },
): Promise<void> {
  const run = await runOf(c, campaignId, p.synthesisId);
  const at = { campaignId, type: 'StageCompleted', stage: p.stage };
  if (p.model === null || p.model === undefined) {
    const r = await c.query(
      `insert into synthesis_funnel_marks as m (campaign_id, run_id, stage, no_model) values ($1, $2, $3, true)
       on conflict (campaign_id, run_id, stage) do update set no_model = true where not m.no_model
       returning 1`,
      [campaignId, run, p.stage],
    );
    if (r.rowCount) await bump(c, { ...at, key: 'no-model' }, 1);
    return;
  }
  // A model call without a prompt hash is kept as '' (never the config-patch prompt's hash).
  const hash = typeof p.promptVersionHash === 'string' ? p.promptVersionHash : '';
  // The row lock of the upsert orders two transactions adding hashes to one run's stage (a run
  // and its variant record in their own streams), so each sees the other's set.
  const r = await c.query<{ hashes: string[] }>(
    `insert into synthesis_funnel_marks as m (campaign_id, run_id, stage, hashes) values ($1, $2, $3, array[$4::text])
     on conflict (campaign_id, run_id, stage) do update
       set hashes = (select array_agg(h order by h) from unnest(m.hashes || $4::text) h)
       where not $4::text = any(m.hashes)
     returning hashes`,
    [campaignId, run, p.stage, hash],
  );
  const now = r.rows[0]?.hashes;
  if (!now) return;
  const before = now.filter((h) => h !== hash);
  if (before.length > 0) await bump(c, { ...at, key: 'model', hashes: before }, -1);
  await bump(c, { ...at, key: 'model', hashes: now }, 1);
}

/** Records one event in the funnel (the pool projection calls it for every event it applies). */
export async function recordFunnelEvent(c: pg.ClientBase, type: string, payload: unknown): Promise<void> {
  const p = payload as Record<string, unknown>;
  if (typeof p?.campaignId !== 'string') return;
  const campaignId = p.campaignId;
  if (type === 'SynthesisStarted') {
    if (typeof p.synthesisId === 'string')
      await c.query(
        `insert into synthesis_funnel_marks (campaign_id, run_id, stage) values ($1, $2, '') on conflict do nothing`,
        [campaignId, p.synthesisId],
      );
    return;
  }
  if (type === 'StageCompleted' || type === 'StageFailed') {
    // Only a completion reaches its stage in the funnel; a failed stage's run is rejected after it.
    if (type === 'StageCompleted' && typeof p.synthesisId === 'string' && typeof p.stage === 'string')
      await markStage(c, campaignId, {
        synthesisId: p.synthesisId,
        stage: p.stage,
        model: p.model,
        promptVersionHash: p.promptVersionHash,
      });
    // Its generator tokens (StageCompleted v2, StageFailed; a stage without a model, or an older
    // event, has none). `stages` counts completions, `failed` failed runs (migration 0030).
    if (typeof p.stage === 'string' && typeof p.promptTokens === 'number') {
      const failed = type === 'StageFailed' ? 1 : 0;
      await c.query(
        `insert into synthesis_tokens as t (campaign_id, stage, stages, failed, prompt_tokens, completion_tokens)
         values ($1, $2, $3, $4, $5, $6)
         on conflict (campaign_id, stage) do update set stages = t.stages + excluded.stages,
           failed = t.failed + excluded.failed,
           prompt_tokens = t.prompt_tokens + excluded.prompt_tokens,
           completion_tokens = t.completion_tokens + excluded.completion_tokens`,
        [
          campaignId,
          p.stage,
          1 - failed,
          failed,
          p.promptTokens,
          typeof p.completionTokens === 'number' ? p.completionTokens : 0,
        ],
      );
    }
    return;
  }
  if (!COUNTED.has(type)) return;
  await bump(
    c,
    {
      campaignId,
      type,
      stage: typeof p.stage === 'string' ? p.stage : '',
      key: type === 'CandidateRejected' && typeof p.reasonCode === 'string' ? p.reasonCode : '',
    },
    1,
  );
}

export interface FunnelRow {
  type: string;
  stage: string | null;
  key: string | null;
  n: number;
}

/**
 * The funnel's counts per event type, stage and key: distinct runs per stage for StageCompleted
 * (key `no-model`, `repair` when the run called the config-patch prompt, `model` when it called
 * another), CandidateRejected per reason, plain counts for the rest. A handful of rows whatever
 * the campaign's age; analysis/status/funnel.ts reads them.
 */
export async function synthesisFunnelRows(
  db: Queryable,
  campaignId: string,
  repairPromptHash: string,
): Promise<FunnelRow[]> {
  const { rows } = await db.query<FunnelRow>(
    `select f.type, nullif(f.stage, '') as stage, k.key, sum(f.n)::int as n
       from synthesis_funnel_counts f
       cross join lateral (
         select nullif(f.key, '') as key where not (f.type = 'StageCompleted' and f.key = 'model')
         union all
         select 'repair' where f.type = 'StageCompleted' and f.key = 'model' and $2 = any(f.hashes)
         union all
         select 'model' where f.type = 'StageCompleted' and f.key = 'model'
                          and exists (select 1 from unnest(f.hashes) h where h <> $2)
       ) k
      where f.campaign_id = $1
      group by 1, 2, 3`,
    [campaignId, repairPromptHash],
  );
  return rows;
}

export interface StageTokens {
  stage: string;
  /** Stage completions that reported usage. */
  stages: number;
  /** Failed stage runs (every answer refused: StageFailed) that reported usage; their tokens are in the sums. */
  failed: number;
  promptTokens: number;
  completionTokens: number;
}

/** The generator's tokens of the campaign per synthesis stage (one row per stage), failed runs' included. */
export async function synthesisTokens(db: Queryable, campaignId: string): Promise<StageTokens[]> {
  const { rows } = await db.query<StageTokens>(
    `select stage, stages::int as stages, failed::int as failed, prompt_tokens::float8 as "promptTokens",
            completion_tokens::float8 as "completionTokens"
       from synthesis_tokens where campaign_id = $1 order by stage`,
    [campaignId],
  );
  return rows;
}

/** The campaign's candidates rejected with a reason code (CandidateRejected, counted by the funnel). */
export async function rejectionsWithReason(
  db: Queryable,
  campaignId: string,
  reasonCode: string,
): Promise<number> {
  const { rows } = await db.query<{ n: number }>(
    `select coalesce(sum(n), 0)::int as n from synthesis_funnel_counts
      where campaign_id = $1 and type = 'CandidateRejected' and key = $2`,
    [campaignId, reasonCode],
  );
  return rows[0]!.n;
}
