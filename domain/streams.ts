// Names of the event-store streams, shared by activities, workflows and replay (pure).
export const campaignStream = (campaignId: string) => `campaign-${campaignId}`;
export const synthesisStream = (synthesisId: string) => `synthesis-${synthesisId}`;
