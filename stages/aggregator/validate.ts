// Why a decoded record may not reach the statistics: a campaign that is not registered, or a
// group the campaign's reward limits refuse (the rules themselves are the domain's checkGroup);
// the checks of ids and text, shared with replay, are domain/record-checks.ts. Each answer
// becomes a dead letter's code and reason.
import type { CampaignConfig } from '../../domain/campaign-config.js';
import type { Problem } from '../../domain/record-checks.js';
import { checkGroup } from '../../domain/reward-group.js';
import type { CampaignRow } from '../../platform/store/campaigns.js';
import type { Closing, DeadLetterNote, Group } from './records.js';

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
