// The activities' one reading of a campaign config. A workflow hands its activities the config
// as the campaign recorded it (unknown on the wire); each distinct config is parsed once per
// worker process and then served from memory, so a synthesis' many activity calls do not parse
// it again. The parsed config is shared, and frozen so that nobody changes it for everyone.
import { type CampaignConfig, parseCampaignConfig } from '../domain/campaign-config.js';
import { canonicalJson } from '../domain/canonical-json.js';

/** Distinct configs kept (a worker serves a few campaigns, each with a few config versions). */
const KEPT = 64;
const parsed = new Map<string, CampaignConfig>();

/** Freezes every object and array in `v`: a shared config that someone changed would change for all. */
function deepFreeze<T>(v: T): T {
  if (v && typeof v === 'object' && !Object.isFrozen(v)) {
    Object.freeze(v);
    for (const x of Object.values(v)) deepFreeze(x);
  }
  return v;
}

/** The parsed config (CampaignConfigError when it is not valid; nothing is kept then). */
export function campaignConfigOf(raw: unknown): CampaignConfig {
  const key = canonicalJson(raw ?? {});
  const hit = parsed.get(key);
  if (hit) {
    // Most recently used last, so the oldest is the one dropped.
    parsed.delete(key);
    parsed.set(key, hit);
    return hit;
  }
  const config = deepFreeze(parseCampaignConfig(raw));
  if (parsed.size >= KEPT) parsed.delete(parsed.keys().next().value as string);
  parsed.set(key, config);
  return config;
}

/** The config a campaign with no recorded config runs with: every default. */
export const DEFAULT_CONFIG: CampaignConfig = campaignConfigOf({});
