// The campaign registry: CampaignStarted in the campaign's stream plus the `campaigns`
// projection row, written in one transaction (event first, as the store asks).
//
// Config versions: `campaigns.config_version` is bumped by every CampaignReconfigured, in the
// transaction that records it, and `campaign_configs` keeps every version with the first step it
// applies to (fromStep). A reconfiguration applies to reward groups of steps after the highest
// step the aggregator had counted when it committed; an exclusive per-campaign lock here and a
// shared one in each aggregator batch make that boundary exact (aggregator/README.md).
import type pg from 'pg';
import { defaultRegistry } from '../codec/registry.js';
import {
  type CampaignConfig,
  CampaignConfigError,
  campaignConfigSizeError,
  parseCampaignConfig,
  withNewCampaignSettings,
} from '../domain/campaign-config.js';
import { canonicalJson } from '../domain/canonical-json.js';
import { eventIds, streams } from '../domain/ids.js';
import { inTransaction } from './db.js';
import { append, typedEvent } from './event-store.js';

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
  parseCampaignConfig(input.config ?? {}); // refuses a bad config before anything is written
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
    config: parseCampaignConfig(r.config),
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
      config: parseCampaignConfig(x.config),
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
  await tx.query('select pg_advisory_xact_lock(hashtextextended($1, 0))', [configLock(campaignId)]);
  const { rows } = await tx.query<{ version: number | null; from_step: number }>(
    `select (select config_version from campaigns where campaign_id = $1) as version,
            coalesce((select max(step) + 1 from step_progress where campaign_id = $1), 0)::bigint as from_step`,
    [campaignId],
  );
  return { configVersion: (rows[0]?.version ?? 0) + 1, fromStep: Number(rows[0]?.from_step ?? 0) };
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
