// Who owns each table: the one module (or folder of small modules) whose SQL names it. Everything else reads and writes the
// table through that module's functions, so a column change has one home and a row type is
// declared once. test/table-owners.unit.test.ts checks every SQL string in the product against
// this map (and that every table the migrations create has an owner).
// A folder owner (platform/store/steps/, platform/store/pool/, ...) keeps the SQL of related tables in small
// modules named after what they do; joins stay inside one owner.
import type pg from 'pg';

export const TABLE_OWNERS = {
  // The event log: events and stream heads (event-store.ts), and its audit (audit.ts: hash-chain
  // verification, anchors, and the store's identity the anchors name).
  events: 'platform/store/events/',
  streams: 'platform/store/events/',
  audit_anchors: 'platform/store/events/',
  rods_settings: 'platform/store/events/',
  // The campaign registry and its config versions.
  campaigns: 'platform/store/campaigns.ts',
  campaign_configs: 'platform/store/campaigns.ts',
  // Each step's plan: the pool state and decisions planning recorded.
  campaign_plans: 'platform/store/campaign-plans.ts',
  // The pool: candidates, pool members and pool versions (the projection writes them, views read).
  candidates: 'platform/store/pool/',
  pool_members: 'platform/store/pool/',
  pool_versions: 'platform/store/pool/',
  // Counts of pool members (by origin, depth and state) and candidates (by status), kept by triggers.
  pool_member_counts: 'platform/store/pool/',
  candidate_counts: 'platform/store/pool/',
  // The generator's tokens per synthesis stage, kept by the pool projection with the funnel.
  synthesis_tokens: 'platform/store/pool/',
  // The synthesis runs in flight (selected, no outcome yet), kept by the pool projection.
  open_syntheses: 'platform/store/pool/',
  // Each seed's run of rejected children, kept with every candidate outcome (the rejection backoff).
  seed_rejection_runs: 'platform/store/pool/',
  // The synthesis funnel: each run's marks per stage and the counts the funnel reads (funnel.ts).
  synthesis_funnel_marks: 'platform/store/pool/',
  synthesis_funnel_counts: 'platform/store/pool/',
  // A training step's intake, in one folder of small SQL modules: the batches the gateway
  // accepted and their claim checks, what the aggregator counted per partition, which steps
  // closed (and the watermark and missing steps read from them).
  ingestion_batches: 'platform/store/steps/',
  step_refusals: 'platform/store/steps/',
  claim_checks: 'platform/store/steps/',
  steps: 'platform/store/steps/',
  step_progress: 'platform/store/steps/',
  // Per-task statistics with their dedupe windows: the aggregator's reads and writes, and views.
  task_stats: 'platform/store/task-stats/',
  // The recorded checkpoints (one row per CheckpointSaved, with the steps its run trained again)
  // and the checkpoints that wait for a step to close.
  checkpoint_records: 'platform/store/checkpoints/',
  checkpoint_retrained: 'platform/store/checkpoints/',
  checkpoint_waits: 'platform/store/checkpoints/',
  // Where each projection has read the log to.
  projection_checkpoints: 'platform/store/projections.ts',
  // The aggregator's own state: Kafka offsets with the rejections they carry, parked records,
  // records that failed and the suspect markers written before a batch is folded.
  aggregator_offsets: 'platform/store/aggregator/',
  aggregator_rejections: 'platform/store/aggregator/',
  aggregator_parked: 'platform/store/aggregator/',
  aggregator_record_failures: 'platform/store/aggregator/',
  aggregator_suspects: 'platform/store/aggregator/',
} as const;

export type Table = keyof typeof TABLE_OWNERS;

/** Every row of a campaign in `table` (all columns, in `order`), for a full export. */
export async function campaignRows(
  c: pg.ClientBase,
  table: Table,
  campaignId: string,
  order: string,
): Promise<{ columns: string[]; rows: Record<string, unknown>[] }> {
  const r = await c.query(`select * from ${table} where campaign_id = $1 order by ${order}`, [campaignId]);
  return { columns: r.fields.map((f) => f.name), rows: r.rows };
}

/** Bytes of every owned table on disk, indexes and TOAST included (the benches' growth figures). */
export async function relationSizes(db: pg.Pool | pg.ClientBase): Promise<Record<string, number>> {
  const tables = Object.keys(TABLE_OWNERS);
  const r = await db.query<{ name: string; bytes: string }>(
    `select t as name, pg_total_relation_size(to_regclass(t))::text as bytes from unnest($1::text[]) t
      where to_regclass(t) is not null`,
    [tables],
  );
  return Object.fromEntries(r.rows.map((x) => [x.name, Number(x.bytes)]));
}
