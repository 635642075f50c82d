// Child process of the scale bench (dev/bench/scale.ts): replays a campaign's reward groups from
// its topic as `rods replay --source kafka` does (readCampaignGroups + foldGroups), after a plain
// read of the same records, in a process of its own so that its heap (every group of the
// campaign held at once, as the replay does) neither limits nor inflates the bench's.
// argv: topic campaignId configJson. Prints one JSON object on stdout.
import { type CampaignConfig, parseCampaignConfig } from '../../domain/campaign-config.js';
import type { TaskState } from '../../domain/task-stats.js';
import { foldGroups, readCampaignGroups } from '../../replay/reward-stream.js';

const [topic, campaignId, configJson] = process.argv.slice(2);
if (!topic || !campaignId) throw new Error('usage: scale-replay.ts TOPIC CAMPAIGN [CONFIG_JSON]');
const cfg: CampaignConfig = parseCampaignConfig(JSON.parse(configJson ?? '{}'));

// Baseline: read and decode every record, nothing else.
const t0 = performance.now();
let read = await readCampaignGroups(topic, campaignId);
const rawSeconds = (performance.now() - t0) / 1000;
const records = read.length;
read = [];

// Replay: read again and fold with the live statistics code.
const t1 = performance.now();
const again = await readCampaignGroups(topic, campaignId);
const states = new Map<string, TaskState>();
const folded = foldGroups(again, states, new Set(), cfg);
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
