// The campaign workflow's messages, by name and type: the status query and update, pause,
// resume, stop and reconfigure, and the signal a synthesis child sends when it ends. The workflow
// sets their handlers; the CLI, the gateway and the status tools call them through the client.
import { defineQuery, defineSignal, defineUpdate } from '@temporalio/workflow';
import type { CampaignStatus, SynthesisOutcome } from '../../domain/campaign-state.js';

export const statusQuery = defineQuery<CampaignStatus>('status');
export const statusUpdate = defineUpdate<CampaignStatus>('status');
export const pauseUpdate = defineUpdate<CampaignStatus, [{ reason?: string }]>('pause');
export const resumeUpdate = defineUpdate<CampaignStatus>('resume');
export const stopUpdate = defineUpdate<CampaignStatus, [{ reason?: string }]>('stop');
export const reconfigureUpdate = defineUpdate<CampaignStatus, [{ config: unknown }]>('reconfigure');
export const synthesisFinished = defineSignal<[SynthesisOutcome]>('synthesisFinished');
