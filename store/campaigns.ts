// The campaign registry: CampaignStarted in the campaign's stream plus the `campaigns`
// projection row, written in one transaction (event first, as the store asks).
import type pg from 'pg';
import { defaultRegistry } from '../codec/registry.js';
import { type CampaignConfig, parseCampaignConfig } from '../domain/campaign-config.js';
import { eventIds, streams } from '../domain/ids.js';
import { inTransaction } from './db.js';
import { append } from './event-store.js';

export interface CampaignRow {
  campaignId: string;
  name: string;
  /** The config as given (window specs as strings), parsed with parseCampaignConfig when used. */
  rawConfig: unknown;
  config: CampaignConfig;
  status: string;
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
  const raw = input.config ?? {};
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
      {
        eventId,
        type: 'CampaignStarted',
        fingerprint: registry.current('CampaignStarted')!.fingerprint,
        payload,
        metadata: { producer: 'rods' },
      },
    ]);
    if (r.appended) {
      await c.query(
        'insert into campaigns (campaign_id, name, config) values ($1, $2, $3) on conflict (campaign_id) do nothing',
        [input.campaignId, name, JSON.stringify(raw)],
      );
    }
  });
  return (await loadCampaign(pool, input.campaignId))!;
}

export async function loadCampaign(
  db: pg.Pool | pg.PoolClient,
  campaignId: string,
): Promise<CampaignRow | undefined> {
  const { rows } = await db.query<{ campaign_id: string; name: string; config: unknown; status: string }>(
    'select campaign_id, name, config, status from campaigns where campaign_id = $1',
    [campaignId],
  );
  const r = rows[0];
  if (!r) return undefined;
  return {
    campaignId: r.campaign_id,
    name: r.name,
    rawConfig: r.config,
    config: parseCampaignConfig(r.config),
    status: r.status,
  };
}
