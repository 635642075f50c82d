// A process's one reading of a campaign config: the store's campaign rows, the gateway's intake,
// the activities (a workflow hands them the config as the campaign recorded it, unknown on the
// wire) and what-if all parse through here. Each distinct config is parsed once per process and
// then served from memory, so a synthesis' many activity calls and every rollout batch do not
// parse it again. The parsed config is shared, and frozen so that nobody changes it for everyone.
// Workflow code (its own sandbox, no platform imports) parses its input once per run.
import { type CampaignConfig, parseCampaignConfig } from '../../domain/campaign-config.js';
import { canonicalJson } from '../../domain/canonical-json.js';

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
