// Why a decoded record may not reach the statistics: a group's event id that is not a UUID, an id
// PostgreSQL cannot store, a campaign that is not registered, or a group the campaign's reward
// limits refuse (the rules themselves are the domain's checkGroup). Each answer becomes a dead
// letter's code and reason.
import type { CampaignConfig } from '../domain/campaign-config.js';
import { checkGroup } from '../domain/reward-group.js';
import { unstorableCharacter } from '../domain/storable-text.js';
import type { CampaignRow } from '../store/campaigns.js';
import type { Closing, DeadLetterNote, Group } from './decode.js';

export interface Problem {
  code: string;
  reason: string;
}

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/** The dedupe window stores event ids as uuid, so anything else is refused at decode. */
export function eventIdProblem(eventId: string): Problem | null {
  return UUID.test(eventId)
    ? null
    : { code: 'bad-event-id', reason: `eventId ${JSON.stringify(eventId)} is not a UUID` };
}

/**
 * A string PostgreSQL cannot store (U+0000, a lone surrogate) would fail every transaction it
 * reaches, so it is refused before any query sees it. Control characters it can store pass.
 */
export function unstorableProblem(fields: Readonly<Record<string, string>>): Problem | null {
  for (const [name, value] of Object.entries(fields)) {
    const why = unstorableCharacter(value, { controls: false });
    // JSON.stringify escapes U+0000 and lone surrogates: the reason itself is storable text.
    if (why)
      return { code: 'unstorable-text', reason: `${name} ${JSON.stringify(value.slice(0, 200))} ${why}` };
  }
  return null;
}

export function unknownCampaign(campaignId: string): Problem {
  return { code: 'unknown-campaign', reason: `campaign ${JSON.stringify(campaignId)} is not registered` };
}

/** The campaign's reward limits against the group, given the task's last applied step. */
export function groupProblem(g: Group, lastStep: number | undefined, config: CampaignConfig): Problem | null {
  const rejection = checkGroup(g.rewards, g.step, lastStep, config.rewards);
  return rejection && { code: rejection.code, reason: `${g.taskId} step ${g.step}: ${rejection.reason}` };
}

/** Step closings of campaigns that are not registered go to the dead-letter topic. */
export function unknownCampaignClosings(
  closings: readonly Closing[],
  campaigns: ReadonlyMap<string, CampaignRow | undefined>,
): DeadLetterNote[] {
  return closings
    .filter((c) => !campaigns.get(c.campaignId))
    .map((c) => ({ offset: c.offset, ...unknownCampaign(c.campaignId), key: c.key, value: c.value }));
}
