// The synthesis funnel of a campaign, per stage, from its events: how many runs reached each
// stage, how many candidates came out validated, rejected (by reason) and injected. The demo's
// report shows it; it reads only the event store, so it holds for any campaign.
import type pg from 'pg';
import { promptVersion } from '../activities/llm/prompts.js';

export interface SynthesisFunnel {
  /** Seeds selected for synthesis (one run each). */
  selected: number;
  /** Runs whose stage completed at least once: plan, executed (ground truth ran), repaired (a config patch was applied), rewritten, judged (the LLM judge answered), augmented. */
  planned: number;
  executed: number;
  repaired: number;
  rewritten: number;
  judged: number;
  augmented: number;
  validated: number;
  rejected: number;
  rejectedByReason: Record<string, number>;
  injected: number;
}

/**
 * The funnel of one campaign: distinct synthesis runs per stage (a variant's stages count for its
 * run), events for the rest (validated and rejected include Augment variants).
 */
export async function synthesisFunnel(
  db: pg.Pool | pg.PoolClient,
  campaignId: string,
): Promise<SynthesisFunnel> {
  const { rows } = await db.query<{ type: string; stage: string | null; key: string | null; n: number }>(
    // A run is a SynthesisStarted; an Augment variant has none and counts for the run its id
    // extends (a seed task id may itself end in ~miss_param, so the suffix alone cannot tell).
    `with campaign_events as (
       select type, payload from events
        where payload->>'campaignId' = $1
          and type in ('SynthesisStarted', 'SeedSelected', 'StageCompleted', 'CandidateValidated',
                       'CandidateRejected', 'TaskInjected')
     ), runs as (
       select payload->>'synthesisId' as id from campaign_events where type = 'SynthesisStarted'
     )
     select type,
            payload->>'stage' as stage,
            case when type = 'StageCompleted' then
              case when payload->>'promptVersionHash' = $2 then 'repair'
                   when payload->>'model' is null then 'no-model' else 'model' end
                 when type = 'CandidateRejected' then payload->>'reasonCode' end as key,
            (case when type = 'StageCompleted'
                  then count(distinct case when payload->>'synthesisId' in (select id from runs)
                                           then payload->>'synthesisId'
                                           else regexp_replace(payload->>'synthesisId', '~(miss_func|miss_param)$', '') end)
                  else count(*) end)::int as n
       from campaign_events
      where type <> 'SynthesisStarted'
      group by 1, 2, 3`,
    [campaignId, promptVersion('config-patch')],
  );
  const count = (type: string, stage?: string, key?: string) =>
    rows
      .filter(
        (r) =>
          r.type === type &&
          (stage === undefined || r.stage === stage) &&
          (key === undefined || r.key === key),
      )
      .reduce((a, r) => a + r.n, 0);
  const rejectedByReason: Record<string, number> = {};
  for (const r of rows) if (r.type === 'CandidateRejected') rejectedByReason[r.key ?? 'unknown'] = r.n;
  return {
    selected: count('SeedSelected'),
    planned: count('StageCompleted', 'plan'),
    // the env stage records 'execute' without a model once the ground truth ran
    executed: count('StageCompleted', 'execute', 'no-model'),
    repaired: count('StageCompleted', 'execute', 'repair'),
    rewritten: count('StageCompleted', 'rewrite'),
    judged: count('StageCompleted', 'critique', 'model'),
    augmented: count('StageCompleted', 'augment'),
    validated: count('CandidateValidated'),
    rejected: count('CandidateRejected'),
    rejectedByReason,
    injected: count('TaskInjected'),
  };
}
