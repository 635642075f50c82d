// The campaigns a batch names, looked up outside its transaction and cached per process.
import type pg from 'pg';
import { type CampaignRow, loadCampaign } from '../store/campaigns.js';

/** Campaign lookups are cached; an unknown id is looked up again after a short while. */
export class CampaignCache {
  private readonly known = new Map<string, CampaignRow>();
  private readonly missing = new Map<string, number>();
  constructor(
    private readonly pool: pg.Pool,
    private readonly retryMs = 2000,
  ) {}

  async get(campaignId: string): Promise<CampaignRow | undefined> {
    const hit = this.known.get(campaignId);
    if (hit) return hit;
    const missedAt = this.missing.get(campaignId);
    if (missedAt !== undefined && Date.now() - missedAt < this.retryMs) return undefined;
    const row = await loadCampaign(this.pool, campaignId);
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

  forget(campaignId: string): void {
    this.known.delete(campaignId);
  }
}
