// Child process of the scale bench (dev/bench/scale.ts): replays a campaign's reward groups from
// its topic as `rods replay --source kafka` does (foldCampaignGroups: each fetched batch folded
// as it arrives), after a plain read of the same records, in a process of its own so that its
// heap (the per-task states and the event ids seen) neither limits nor inflates the bench's.
// argv: topic campaignId configJson. Prints one JSON object on stdout.

import { foldCampaignGroups, forEachCampaignGroup } from '../../analysis/replay/reward-stream.js';
import { type CampaignConfig, parseCampaignConfig } from '../../domain/campaign-config.js';
import { DedupeWindows } from '../../domain/dedupe.js';
import type { TaskState } from '../../domain/task-stats.js';

const [topic, campaignId, configJson] = process.argv.slice(2);
if (!topic || !campaignId) throw new Error('usage: scale-replay.ts TOPIC CAMPAIGN [CONFIG_JSON]');
const cfg: CampaignConfig = parseCampaignConfig(JSON.parse(configJson ?? '{}'));

// Baseline: read and decode every record, nothing else.
const t0 = performance.now();
let records = 0;
await forEachCampaignGroup(topic, campaignId, (groups) => {
  records += groups.length;
});
const rawSeconds = (performance.now() - t0) / 1000;

// Replay: read again and fold with the live statistics code.
const t1 = performance.now();
const states = new Map<string, TaskState>();
const folded = await foldCampaignGroups(topic, campaignId, states, new DedupeWindows(), cfg);
const replaySeconds = (performance.now() - t1) / 1000;

const out = {
  records,
  folded,
  raw_seconds: rawSeconds,
  replay_seconds: replaySeconds,
  rss_bytes: process.memoryUsage().rss,
  states: [...states].map(([taskId, s]) => ({
    taskId,
    groups: s.groups,
    rollouts: s.moments.n,
    mean: s.moments.mean,
    m2: s.moments.m2,
    band: s.band,
    lastStep: s.lastStep,
  })),
};
process.stdout.write(`${JSON.stringify(out)}\n`);
process.exit(0);
