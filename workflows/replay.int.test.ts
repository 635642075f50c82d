// Replay determinism: recorded histories of both workflows (workflows/fixtures/; a new pair is
// recorded with RODS_RECORD_FIXTURES=<name> npx vitest run workflows/campaign.e2e.test.ts; binary
// protobuf, because this install's two protobufjs copies break the JSON history converter) replay
// against the current workflow code without a determinism error. Every fixture is kept: the
// oldest were recorded before any patch, the newest with all of them.
import { readdirSync, readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { temporal } from '@temporalio/proto';
import { bundleWorkflowCode, Runtime, Worker } from '@temporalio/worker';
import { describe, expect, it } from 'vitest';
import { installWorkerRuntime } from '../platform/temporal/connect.js';

describe('workflow replay', () => {
  it('replays the recorded campaign and synthesis histories without determinism errors', async () => {
    await installWorkerRuntime('WARN');
    const workflowBundle = await bundleWorkflowCode({
      logger: Runtime.instance().logger,
      workflowsPath: fileURLToPath(new URL('./index.ts', import.meta.url)),
    });
    const dir = new URL('./fixtures/', import.meta.url);
    const files = readdirSync(dir)
      .filter((f) => /^(campaign|synthesis)-history(\.[\w-]+)?\.pb$/.test(f))
      .sort();
    const histories = files.map((f) => ({
      workflowId: f.replace(/\.pb$/, ''),
      history: temporal.api.history.v1.History.decode(readFileSync(new URL(f, dir))),
    }));
    const of = (f: string) => histories[files.indexOf(f)]!.history;
    // Not vacuous: the fixtures hold real runs (children started, activities completed).
    expect(of('campaign-history.pb').events.length).toBeGreaterThan(30);
    expect(
      of('campaign-history.pb').events.some((e) => e.startChildWorkflowExecutionInitiatedEventAttributes),
    ).toBe(true);
    expect(of('synthesis-history.pb').events.some((e) => e.activityTaskCompletedEventAttributes)).toBe(true);
    // The newest pair ran with every patch of its day, Augment included.
    const markers = (h: temporal.api.history.v1.IHistory) =>
      (h.events ?? []).flatMap((e) => {
        const m = e.markerRecordedEventAttributes;
        const id = m?.details?.['patch-data']?.payloads?.[0]?.data;
        return m?.markerName === 'core_patch' && id ? [Buffer.from(id).toString('utf8')] : [];
      });
    const synthesisPatches = markers(of('synthesis-history.v2.pb')).join(' ');
    for (const patch of ['augment-stage', 'repair-budget-per-candidate', 'local-bookkeeping-activities'])
      expect(synthesisPatches).toContain(patch);
    expect(markers(of('campaign-history.v2.pb')).join(' ')).toContain('parallel-child-starts');
    let replayed = 0;
    for await (const r of Worker.runReplayHistories({ workflowBundle }, histories)) {
      expect(r.error, `${r.workflowId}: ${r.error?.message}`).toBeUndefined();
      replayed++;
    }
    expect(replayed).toBe(files.length);
  }, 120_000);
});
