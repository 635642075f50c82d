// Replay of a recorded reward history: read a campaign's reward groups back from Kafka and fold
// them with the live statistics code (dedupe, validation, Welford/Chan, detector) — what
// `rods replay --source kafka` and `rods whatif` do — against, in the same run, a plain read of
// the same records that only decodes them. ratio = replay events/s / raw read events/s, each
// the best of --rounds (default 2) alternating runs. Options: --groups, --tasks, --rounds.

import { randomUUID } from 'node:crypto';
import { foldCampaignGroups, forEachCampaignGroup } from '../../analysis/replay/reward-stream.js';
import { parseCampaignConfig } from '../../domain/campaign-config.js';
import { DedupeWindows } from '../../domain/dedupe.js';
import type { TaskState } from '../../domain/task-stats.js';
import { withAdmin } from '../../platform/kafka/client.js';
import { encodeRecord, freshRewardTopic, makeTrace, produceTrace } from '../../stages/aggregator/trace.js';
import type { BenchResult } from './result.js';

export default async function replayBench(opts: Record<string, string | boolean>): Promise<BenchResult> {
  const groups = Number(opts.groups ?? 1_000_000);
  const tasks = Number(opts.tasks ?? 2000);
  const rounds = Math.max(1, Number(opts.rounds ?? 2));
  const log = (m: string) => opts.json || console.error(m);
  const campaignId = `bench-replay-${randomUUID().slice(0, 8)}`;
  const topic = await freshRewardTopic('bench.replay', 6);
  try {
    const trace = makeTrace({ campaignId, tasks, steps: Math.ceil(groups / tasks), seed: 3 });
    const records = trace.records.filter((r) => r.kind === 'group').map((r) => encodeRecord(r, campaignId));
    log(`producing ${records.length} reward groups ...`);
    await produceTrace(topic, records);

    // Baseline: read and decode every record (the same reader, no folding), counting them.
    const rawRun = async (): Promise<number> => {
      const t = performance.now();
      let n = 0;
      await forEachCampaignGroup(topic, campaignId, (batch) => {
        n += batch.length;
      });
      if (n !== records.length) throw new Error(`read ${n} of ${records.length} groups`);
      return (performance.now() - t) / 1000;
    };
    // Replay: the same read, each batch folded as it arrives with the live statistics code
    // (foldCampaignGroups, what `rods replay --source kafka` runs). Both sides read and decode
    // the same records and neither keeps them past its batch, so the difference is the fold.
    const cfg = parseCampaignConfig({});
    let states = new Map<string, TaskState>();
    const replayRun = async (): Promise<number> => {
      const t = performance.now();
      states = new Map();
      const folded = await foldCampaignGroups(topic, campaignId, states, new DedupeWindows(), cfg);
      if (folded !== records.length) throw new Error(`replayed ${folded} of ${records.length} groups`);
      return (performance.now() - t) / 1000;
    };
    // Alternate the two for a few rounds and keep each one's best time, so that a burst of other
    // work on the shared machine does not decide the ratio.
    let rawSeconds = Number.POSITIVE_INFINITY;
    let replaySeconds = Number.POSITIVE_INFINITY;
    for (let r = 0; r < rounds; r++) {
      rawSeconds = Math.min(rawSeconds, await rawRun());
      replaySeconds = Math.min(replaySeconds, await replayRun());
      log(
        `round ${r + 1}: raw ${rawSeconds.toFixed(1)} s, replay ${replaySeconds.toFixed(1)} s (best so far)`,
      );
    }
    const eventsPerS = records.length / replaySeconds;
    const rawPerS = records.length / rawSeconds;
    return {
      groups: records.length,
      tasks: states.size,
      rounds,
      events_per_s: Math.round(eventsPerS),
      raw_read_events_per_s: Math.round(rawPerS),
      ratio: Number((eventsPerS / rawPerS).toFixed(3)),
    };
  } finally {
    await withAdmin((a) => a.deleteTopics([topic])).catch(() => {});
  }
}
