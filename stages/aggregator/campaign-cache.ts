// The campaigns a batch names, cached per process with their config versions. The cache is
// re-checked once per batch, inside the batch's transaction (one version query for the batch's
// campaigns), and a campaign whose version changed is reloaded there: a reconfiguration reaches
// every running instance at its next batch, and the configs a batch folds with are the ones
// current when it commits (platform/store/campaigns.ts, stages/aggregator/README.md "Config versions").
import type pg from 'pg';
import { type CampaignRow, loadCampaign, lockedConfigVersions } from '../../platform/store/campaigns.js';

/** Campaign lookups are cached; an unknown id is looked up again after a short while. */
export class CampaignCache {
  private readonly known = new Map<string, CampaignRow>();
  private readonly missing = new Map<string, number>();
  constructor(
    private readonly pool: pg.Pool,
    private readonly retryMs = 2000,
  ) {}

  /** A cached lookup (no version check: use `current` where the config matters). */
  async get(campaignId: string): Promise<CampaignRow | undefined> {
    const hit = this.known.get(campaignId);
    if (hit) return hit;
    const missedAt = this.missing.get(campaignId);
    if (missedAt !== undefined && Date.now() - missedAt < this.retryMs) return undefined;
    const row = await loadCampaign(this.pool, campaignId, { history: true });
    if (row) {
      this.known.set(campaignId, row);
      this.missing.delete(campaignId);
    } else this.missing.set(campaignId, Date.now());
    return row;
  }

  /** Each id once, in the order given; undefined for a campaign that is not registered. */
  async getAll(campaignIds: Iterable<string>): Promise<Map<string, CampaignRow | undefined>> {
    const out = new Map<string, CampaignRow | undefined>();
    for (const id of new Set(campaignIds)) out.set(id, await this.get(id));
    return out;
  }

  /**
   * The campaigns at their current config version, checked inside the batch transaction `tx`
   * (which then holds their config locks shared until it ends). Reloads, in `tx`, each campaign
   * that is new or whose version changed; undefined for a campaign that is not registered.
   */
  async current(
    tx: pg.PoolClient,
    campaignIds: Iterable<string>,
  ): Promise<Map<string, CampaignRow | undefined>> {
    const ids = [...new Set(campaignIds)];
    const versions = await lockedConfigVersions(tx, ids);
    const out = new Map<string, CampaignRow | undefined>();
    for (const id of ids) {
      const version = versions.get(id);
      let row = this.known.get(id);
      if (version === undefined) {
        this.known.delete(id);
        row = undefined;
      } else if (row?.configVersion !== version) {
        row = await loadCampaign(tx, id, { history: true });
        if (row) {
          this.known.set(id, row);
          this.missing.delete(id);
        }
      }
      out.set(id, row);
    }
    return out;
  }

  forget(campaignId: string): void {
    this.known.delete(campaignId);
  }
}
