// The campaign registry: CampaignStarted in the campaign's stream plus the `campaigns`
// projection row, written in one transaction (event first, as the store asks).
//
// Config versions: `campaigns.config_version` is bumped by every CampaignReconfigured, in the
// transaction that records it, and `campaign_configs` keeps every version with the first step it
// applies to (fromStep). A reconfiguration applies to reward groups of steps after the highest
// step the aggregator had counted when it committed; an exclusive per-campaign lock here and a
// shared one in each aggregator batch make that boundary exact (stages/aggregator/README.md).
import type pg from 'pg';
import {
  type CampaignConfig,
  CampaignConfigError,
  campaignConfigSizeError,
  withNewCampaignSettings,
} from '../../domain/campaign-config.js';
import { canonicalJson } from '../../domain/canonical-json.js';
import { eventIds, streams } from '../../domain/ids.js';
import { defaultRegistry } from '../codec/registry.js';
import { campaignConfigOf } from '../config/campaign-config.js';
import { inTransaction } from './db.js';
import { append, typedEvent } from './events/event-store.js';
import { lockForTransaction } from './locks.js';
import { highestCountedStep } from './steps/progress.js';

export interface CampaignRow {
  campaignId: string;
  name: string;
  /** The config as given (window specs as strings), parsed with parseCampaignConfig when used. */
  rawConfig: unknown;
  /** The newest config. */
  config: CampaignConfig;
  status: string;
  /** Bumped by every reconfiguration. */
  configVersion: number;
  /** Every version, oldest first (loaded with `history`); see configAtStep. */
  configs?: ConfigVersion[];
}

export interface ConfigVersion {
  version: number;
  /** Reward groups of this step and later use this version (until a newer one applies). */
  fromStep: number;
  config: CampaignConfig;
}

/** The config that applies to reward groups of `step`: the newest version whose fromStep <= step. */
export function configAtStep(row: CampaignRow, step: number): CampaignConfig {
  let out: CampaignConfig | undefined;
  for (const v of row.configs ?? []) if (v.fromStep <= step) out = v.config;
  return out ?? row.configs?.[0]?.config ?? row.config;
}

export class UnknownCampaignError extends Error {
  override name = 'UnknownCampaignError';
  constructor(readonly campaignId: string) {
    super(`unknown campaign ${JSON.stringify(campaignId)}`);
  }
}

/** Registers a campaign (idempotent for the same id: a second call is a no-op). */
export async function registerCampaign(
  pool: pg.Pool,
  input: { campaignId: string; name?: string; config?: unknown; actor?: string },
): Promise<CampaignRow> {
  campaignConfigOf(input.config ?? {}); // refuses a bad config before anything is written
  // What a new campaign records explicitly (domain/campaign-config.ts NEW_CAMPAIGN_SETTINGS).
  const raw = withNewCampaignSettings(input.config ?? {});
  const tooLarge = campaignConfigSizeError(raw);
  if (tooLarge) throw new CampaignConfigError([tooLarge]);
  const name = input.name ?? input.campaignId;
  const registry = defaultRegistry();
  await inTransaction(pool, async (c) => {
    const eventId = eventIds.campaignStarted(input.campaignId);
    const payload = {
      eventId,
      campaignId: input.campaignId,
      name,
      config: JSON.stringify(raw),
      actor: input.actor ?? null,
      occurredAt: Date.now(),
    };
    const r = await append(c, streams.campaign(input.campaignId), 'any', [
      typedEvent('CampaignStarted', payload, { producer: 'rods' }, registry),
    ]);
    if (r.appended) {
      await c.query(
        'insert into campaigns (campaign_id, name, config) values ($1, $2, $3) on conflict (campaign_id) do nothing',
        [input.campaignId, name, JSON.stringify(raw)],
      );
      await insertConfigVersion(c, input.campaignId, 1, 0, JSON.stringify(raw));
    }
  });
  return (await loadCampaign(pool, input.campaignId))!;
}

/**
 * Whether a registered campaign is still as registered with this config (never paused, stopped or
 * reconfigured): creating it again then only starts its workflow if that is missing.
 */
export function isAsRegistered(row: CampaignRow, config: unknown): boolean {
  return (
    row.status === 'running' &&
    row.configVersion === 1 &&
    canonicalJson(row.rawConfig ?? {}) === canonicalJson(withNewCampaignSettings(config ?? {}))
  );
}

export async function loadCampaign(
  db: pg.Pool | pg.PoolClient,
  campaignId: string,
  opts: { history?: boolean } = {},
): Promise<CampaignRow | undefined> {
  const { rows } = await db.query<{
    campaign_id: string;
    name: string;
    config: unknown;
    status: string;
    config_version: number;
  }>('select campaign_id, name, config, status, config_version from campaigns where campaign_id = $1', [
    campaignId,
  ]);
  const r = rows[0];
  if (!r) return undefined;
  const row: CampaignRow = {
    campaignId: r.campaign_id,
    name: r.name,
    rawConfig: r.config,
    config: campaignConfigOf(r.config),
    status: r.status,
    configVersion: r.config_version,
  };
  if (opts.history) {
    const v = await db.query<{ version: number; from_step: number; config: unknown }>(
      'select version, from_step, config from campaign_configs where campaign_id = $1 order by version',
      [campaignId],
    );
    row.configs = v.rows.map((x) => ({
      version: x.version,
      fromStep: Number(x.from_step),
      config: campaignConfigOf(x.config),
    }));
  }
  return row;
}

const configLock = (campaignId: string) => `rods-config:${campaignId}`;

/**
 * The current config version of each named campaign that is registered, after waiting for any
 * reconfiguration of them in progress (a shared lock held until the caller's transaction ends,
 * so no reconfiguration commits while the caller folds with the versions it read).
 */
export async function lockedConfigVersions(
  tx: pg.PoolClient,
  campaignIds: readonly string[],
): Promise<Map<string, number>> {
  const ids = [...new Set(campaignIds)].sort();
  if (ids.length === 0) return new Map();
  // Lock first, read after, in two statements: a statement reads from the snapshot taken when
  // it started, so a read in the locking statement could miss the change it waited for.
  await tx.query(
    'select pg_advisory_xact_lock_shared(hashtextextended($2 || id, 0)) from unnest($1::text[]) id',
    [ids, configLock('')],
  );
  const { rows } = await tx.query<{ campaign_id: string; config_version: number }>(
    'select campaign_id, config_version from campaigns where campaign_id = any($1::text[])',
    [ids],
  );
  return new Map(rows.map((r) => [r.campaign_id, r.config_version]));
}

/**
 * Where a reconfiguration being recorded in `tx` applies: its version (the current one + 1) and
 * the first step it applies to, one past the highest step any reward group of the campaign was
 * counted for (applied or refused). Takes the campaign's config lock exclusively, so every
 * aggregator batch that read the old version has committed and none starts until `tx` ends.
 * Call it before appending the event (it writes nothing, so the append keeps the store's order).
 */
export async function reconfigurationPoint(
  tx: pg.PoolClient,
  campaignId: string,
): Promise<{ configVersion: number; fromStep: number }> {
  await lockForTransaction(tx, configLock(campaignId));
  const { rows } = await tx.query<{ version: number | null }>(
    'select config_version as version from campaigns where campaign_id = $1',
    [campaignId],
  );
  const counted = await highestCountedStep(tx, campaignId);
  return { configVersion: (rows[0]?.version ?? 0) + 1, fromStep: counted === null ? 0 : counted + 1 };
}

/** Records one config version (idempotent: the first write of a version wins). */
export async function insertConfigVersion(
  c: pg.PoolClient,
  campaignId: string,
  version: number,
  fromStep: number,
  configJson: string,
): Promise<void> {
  await c.query(
    `insert into campaign_configs (campaign_id, version, from_step, config) values ($1, $2, $3, $4)
     on conflict (campaign_id, version) do nothing`,
    [campaignId, version, fromStep, configJson],
  );
}

/** Whether the server compresses TOAST with lz4 (learnt from the first intake). */
let lz4: boolean | undefined;

/**
 * Takes a batch intake's locks (the campaign's, exclusive for a closing batch and shared
 * otherwise, then the step's) and reads the campaign's config and status in the same round trip.
 */
export async function lockIntake(
  c: pg.PoolClient,
  campaignId: string,
  step: number,
  close: boolean,
): Promise<{ found: boolean; config: unknown; status: string | null }> {
  // A closing batch waits for the campaign's batches in flight and holds new ones back, so no
  // batch opens a step behind it unseen; batches that do not close run side by side. The
  // campaign's lock is taken first (the subquery runs before the outer select list). The same
  // round trip has the claim check compressed with lz4 where the server has it: several times
  // faster than the default pglz on a claim check's hundreds of KiB.
  const compression =
    lz4 === undefined
      ? `(select set_config('default_toast_compression', 'lz4', true) from pg_settings
           where name = 'default_toast_compression' and 'lz4' = any(enumvals))`
      : lz4
        ? `set_config('default_toast_compression', 'lz4', true)`
        : 'null';
  const locked = await c.query<{
    config: unknown;
    status: string | null;
    found: boolean;
    compression: string | null;
  }>(
    `select pg_advisory_xact_lock(hashtextextended($2, 0)), ${compression} as compression,
            (select config from campaigns where campaign_id = $3) as config,
            (select status from campaigns where campaign_id = $3) as status,
            exists (select 1 from campaigns where campaign_id = $3) as found
       from (select ${close ? 'pg_advisory_xact_lock' : 'pg_advisory_xact_lock_shared'}(hashtextextended($1, 0))) campaign_lock`,
    [`ingest/${campaignId}`, `ingest/${campaignId}/${step}`, campaignId],
  );
  const l = locked.rows[0]!;
  lz4 ??= l.compression === 'lz4';
  return l;
}

/** Every campaign with when it was registered and last changed (status, config). */
export async function campaignTimes(
  db: pg.Pool,
): Promise<{ campaignId: string; createdAt: Date; updatedAt: Date }[]> {
  const { rows } = await db.query<{ campaign_id: string; created_at: Date; updated_at: Date }>(
    'select campaign_id, created_at, updated_at from campaigns',
  );
  return rows.map((r) => ({ campaignId: r.campaign_id, createdAt: r.created_at, updatedAt: r.updated_at }));
}

/** Registered campaigns, newest first; `only` limits them to these ids. */
export async function listCampaignRows(
  db: pg.Pool,
  only: readonly string[] | null,
  limit: number,
): Promise<{ campaignId: string; name: string; status: string; createdAt: Date }[]> {
  const { rows } = await db.query<{ campaign_id: string; name: string; status: string; created_at: Date }>(
    `select campaign_id, name, status, created_at from campaigns
      where $1::text[] is null or campaign_id = any($1::text[])
      order by created_at desc limit $2`,
    [only, limit],
  );
  return rows.map((r) => ({
    campaignId: r.campaign_id,
    name: r.name,
    status: r.status,
    createdAt: r.created_at,
  }));
}

/** Whether the campaign is registered. */
export async function isRegistered(db: pg.Pool | pg.PoolClient, campaignId: string): Promise<boolean> {
  const { rowCount } = await db.query('select 1 from campaigns where campaign_id = $1', [campaignId]);
  return (rowCount ?? 0) > 0;
}

/** The campaign's status as its pause, resume or stop event set it. */
export async function setCampaignStatus(c: pg.PoolClient, campaignId: string, status: string): Promise<void> {
  await c.query('update campaigns set status = $2, updated_at = now() where campaign_id = $1', [
    campaignId,
    status,
  ]);
}

/**
 * The campaign's config as a CampaignReconfigured set it, and that version recorded; an event
 * recorded before config versions existed (no `version`) counts as the next version.
 */
export async function setCampaignConfig(
  c: pg.PoolClient,
  campaignId: string,
  configJson: string,
  version: number | undefined,
  fromStep: number,
): Promise<void> {
  const v =
    version ??
    (
      await c.query<{ v: number }>('select config_version + 1 as v from campaigns where campaign_id = $1', [
        campaignId,
      ])
    ).rows[0]?.v ??
    1;
  await c.query(
    'update campaigns set config = $2, config_version = $3, updated_at = now() where campaign_id = $1',
    [campaignId, configJson, v],
  );
  await insertConfigVersion(c, campaignId, v, fromStep, configJson);
}
