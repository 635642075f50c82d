// The scale bench at CI size (200 steps x 50 tasks x 16 rollouts, a private Temporal server that
// suggests continue-as-new after 100 events): its JSON's shape and the invariants that could fail.
// No figure of time or memory is asserted.
import { describe, expect, it } from 'vitest';
import { runScale, scaleOptions } from './scale.js';

const STEPS = 200;
const TASKS = 50;
const THRESHOLD = 100;

describe('scale bench', () => {
  it('applies every group once, replays to the same statistics and bounds each workflow run', async () => {
    const r = await runScale({
      ...scaleOptions({ json: true }),
      steps: STEPS,
      tasks: TASKS,
      duplicateRate: 0.01,
      workflowSteps: 30,
      historyThreshold: THRESHOLD,
    });
    const groups = STEPS * TASKS;

    // Every group applied exactly once; every resent group recognised as a duplicate.
    expect(r.groups).toBe(groups);
    expect(r.duplicates_sent).toBeGreaterThan(0);
    expect(r.records).toBe(groups + r.duplicates_sent + STEPS);
    expect(r.aggregator).toMatchObject({ applied: groups, duplicate: r.duplicates_sent, rejected: 0 });
    expect(r.statistics).toEqual({
      tasks: TASKS,
      groups,
      rollouts: groups * 16,
      step_progress_applied: groups,
      exactly_once: true,
    });

    // RSS sampled at the early milestone (1/8 of the groups here) and at the end.
    expect(r.rss.early_groups).toBeGreaterThanOrEqual(groups / 8);
    expect(r.rss.early_bytes).toBeGreaterThan(0);
    expect(r.rss.early_median_bytes).toBeGreaterThan(0);
    expect(r.rss.final_median_bytes).toBeGreaterThan(0);
    expect(r.rss.final_groups).toBe(groups);
    expect(r.rss.peak_bytes).toBeGreaterThanOrEqual(r.rss.final_bytes);
    expect(typeof r.rss.growth).toBe('number');

    // Per-step cost over the first and last windows of closed steps.
    expect(r.step_cost).toMatchObject({ window: STEPS / 4, steps_closed: STEPS, total_steps: STEPS });
    expect(r.step_cost.first_ms).toBeGreaterThan(0);
    expect(r.step_cost.last_ms).toBeGreaterThan(0);
    expect(r.step_cost.by_decile_ms).toHaveLength(10);
    expect(r.step_cost.applied_first_ms).toBeGreaterThanOrEqual(0);
    expect(r.step_cost.applied_last_ms).toBeGreaterThanOrEqual(0);

    // The campaign's own events: one StepAggregated per step, statistics for every task.
    expect(r.event_store.campaign_events.StepAggregated).toBe(STEPS);
    // One statistics record per step and batch, with an entry per task and step: a batch of a
    // partition holds many steps, so each step has a record per partition (6), two where a batch
    // ends inside it.
    expect(r.event_store.campaign_events.StepStatsRecorded).toBeGreaterThanOrEqual(STEPS);
    expect(r.event_store.campaign_events.StepStatsRecorded).toBeLessThanOrEqual(STEPS * 6 * 2);
    expect(r.event_store.step_stats_entries).toBe(groups);
    expect(r.event_store.campaign_events.TaskStatsUpdated).toBeUndefined();
    expect(r.event_store.campaign_events.TaskBandChanged).toBeUndefined();
    expect(r.event_store.campaign_event_row_bytes_per_step).toBeGreaterThan(0);
    expect(r.event_store.campaign_event_bytes_per_step_with_indexes).toBeGreaterThan(
      r.event_store.campaign_event_row_bytes_per_step,
    );

    // Replay reads every record (duplicates too), folds each group once, to the same statistics.
    expect(r.replay).toMatchObject({
      records: groups + r.duplicates_sent,
      folded: groups,
      tasks: TASKS,
      mismatched_tasks: 0,
      stats_match: true,
    });
    expect(r.replay.ratio).toBeGreaterThan(0);

    // The workflow continued as new several times; every run but the current one ended so, with
    // a history of at least the threshold and at most a few steps past it.
    const wf = r.workflow;
    expect(wf.workflow_steps).toBe(30);
    expect(wf.runs).toBeGreaterThanOrEqual(3);
    expect(wf.continued_as_new_runs).toBe(wf.runs - 1);
    expect(wf.run_steps.reduce((a, b) => a + b, 0)).toBe(30);
    const completed = wf.run_history_events.slice(0, -1);
    for (const n of completed) {
      expect(n).toBeGreaterThanOrEqual(THRESHOLD);
      expect(n).toBeLessThanOrEqual(THRESHOLD + 3 * wf.events_per_step);
    }
    expect(wf.longest_run_history_events).toBe(Math.max(...wf.run_history_events));
  }, 900_000);

  it('live: each step produced once the previous is applied, its statistics in a few records, not one event per group', async () => {
    const steps = 40;
    const r = await runScale({
      ...scaleOptions({ json: true }),
      live: true,
      steps,
      tasks: TASKS,
      duplicateRate: 0.01,
      workflowSteps: 2,
    });
    const groups = steps * TASKS;
    expect(r.aggregator).toMatchObject({ applied: groups, duplicate: r.duplicates_sent, rejected: 0 });
    expect(r.statistics.exactly_once).toBe(true);
    // No batch holds two steps of a task: every applied group is one task entry of its step's
    // records (a resent group is a duplicate and adds nothing), in far fewer events than groups.
    expect(r.event_store.step_stats_entries).toBe(groups);
    // About one record per step and partition (6), a step's records rarely split over two fetches.
    expect(r.event_store.campaign_events.StepStatsRecorded).toBeGreaterThanOrEqual(steps);
    expect(r.event_store.campaign_events.StepStatsRecorded).toBeLessThanOrEqual(steps * 6 * 2);
    expect(r.event_store.campaign_events.StepAggregated).toBe(steps);
    expect(r.replay).toMatchObject({ folded: groups, mismatched_tasks: 0, stats_match: true });
  }, 600_000);
});
