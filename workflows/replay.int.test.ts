// Replay determinism: recorded histories of both workflows (workflows/fixtures/, refreshed with
// RODS_RECORD_FIXTURES=1 npx vitest run workflows/campaign.e2e.test.ts; binary protobuf,
// because this install's two protobufjs copies break the JSON history converter) replay against the
// current workflow code without a determinism error.
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { temporal } from '@temporalio/proto';
import { bundleWorkflowCode, Worker } from '@temporalio/worker';
import { describe, expect, it } from 'vitest';
import { installWorkerRuntime } from '../temporal/connect.js';

describe('workflow replay', () => {
  it('replays the recorded campaign and synthesis histories without determinism errors', async () => {
    await installWorkerRuntime('WARN');
    const workflowBundle = await bundleWorkflowCode({
      workflowsPath: fileURLToPath(new URL('./index.ts', import.meta.url)),
    });
    const histories = ['campaign', 'synthesis'].map((name) => ({
      workflowId: `${name}-fixture`,
      history: temporal.api.history.v1.History.decode(
        readFileSync(new URL(`./fixtures/${name}-history.pb`, import.meta.url)),
      ),
    }));
    // Not vacuous: the fixtures hold real runs (children started, activities completed).
    expect(histories[0]!.history.events.length).toBeGreaterThan(30);
    expect(
      histories[0]!.history.events.some((e) => e.startChildWorkflowExecutionInitiatedEventAttributes),
    ).toBe(true);
    expect(histories[1]!.history.events.some((e) => e.activityTaskCompletedEventAttributes)).toBe(true);
    let replayed = 0;
    for await (const r of Worker.runReplayHistories({ workflowBundle }, histories)) {
      expect(r.error, `${r.workflowId}: ${r.error?.message}`).toBeUndefined();
      replayed++;
    }
    expect(replayed).toBe(2);
  }, 120_000);
});
