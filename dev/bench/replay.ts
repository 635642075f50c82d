// Replay of a recorded reward history: read a campaign's reward groups back from Kafka and fold
// them with the live statistics code (dedupe, validation, Welford/Chan, detector) — what
// `rods replay --source kafka` and `rods whatif` do — against, in the same run, a plain read of
// the same records that only decodes them. ratio = replay events/s / raw read events/s.
import { randomUUID } from 'node:crypto';
import { encodeRecord, freshRewardTopic, makeTrace, produceTrace } from '../../aggregator/trace.js';
import { parseCampaignConfig } from '../../domain/campaign-config.js';
import type { TaskState } from '../../domain/task-stats.js';
import { withAdmin } from '../../kafka/client.js';
import { foldGroups, readCampaignGroups } from '../../replay/reward-stream.js';
import type { BenchResult } from './run.js';

export default async function replayBench(opts: Record<string, string | boolean>): Promise<BenchResult> {
  const groups = Number(opts.groups ?? 1_000_000);
  const tasks = Number(opts.tasks ?? 2000);
  const log = (m: string) => opts.json || console.error(m);
  const campaignId = `bench-replay-${randomUUID().slice(0, 8)}`;
  const topic = await freshRewardTopic('bench.replay', 6);
  try {
    const trace = makeTrace({ campaignId, tasks, steps: Math.ceil(groups / tasks), seed: 3 });
    const records = trace.records.filter((r) => r.kind === 'group').map((r) => encodeRecord(r, campaignId));
    log(`producing ${records.length} reward groups ...`);
    await produceTrace(topic, records);

    // Baseline: read and decode every record (the same reader, no folding).
    const t0 = performance.now();
    const read = await readCampaignGroups(topic, campaignId);
    const rawSeconds = (performance.now() - t0) / 1000;

    // Replay: read again and fold with the live statistics code.
    const cfg = parseCampaignConfig({});
    const t1 = performance.now();
    const again = await readCampaignGroups(topic, campaignId);
    const states = new Map<string, TaskState>();
    const folded = foldGroups(again, states, new Set(), cfg);
    const replaySeconds = (performance.now() - t1) / 1000;
    if (folded !== records.length || read.length !== records.length) {
      throw new Error(`replayed ${folded} of ${records.length} groups (read ${read.length})`);
    }
    const eventsPerS = records.length / replaySeconds;
    const rawPerS = records.length / rawSeconds;
    return {
      groups: records.length,
      tasks: states.size,
      events_per_s: Math.round(eventsPerS),
      raw_read_events_per_s: Math.round(rawPerS),
      ratio: Number((eventsPerS / rawPerS).toFixed(3)),
    };
  } finally {
    await withAdmin((a) => a.deleteTopics([topic])).catch(() => {});
  }
}
