// The pure core must run unchanged inside Temporal's workflow sandbox (no node: modules, no
// clock, no randomness). This bundles a probe workflow that runs a curriculum scenario, replays a
// minimal history with a replay worker (no Temporal server needed) and compares what the
// sandbox computed with the same scenario run in Node. A static scan backs it up.
import { readdirSync, readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import proto from '@temporalio/proto';
import { bundleWorkflowCode, DefaultLogger, type InjectedSinks, Runtime, Worker } from '@temporalio/worker';
import { describe, expect, it } from 'vitest';
import { idSamples } from '../test/support/domain/id-samples.js';
import type { ProbeSinks } from '../test/support/domain/sandbox-probe.workflow.js';
import { runScenario } from '../test/support/domain/sandbox-scenario.js';

const { temporal } = proto;

function quietRuntime(): void {
  try {
    Runtime.install({ logger: new DefaultLogger('WARN') });
  } catch {
    // already installed in this process
  }
}

function startedHistory(workflowType: string) {
  const T = temporal.api.enums.v1.EventType;
  const eventTime = { seconds: 1_704_067_200, nanos: 0 };
  // int64 fields given as numbers (protobufjs accepts them; the generated types ask for Long)
  const history = {
    events: [
      {
        eventId: 1,
        eventTime,
        eventType: T.EVENT_TYPE_WORKFLOW_EXECUTION_STARTED,
        workflowExecutionStartedEventAttributes: {
          workflowType: { name: workflowType },
          taskQueue: { name: 'domain-probe' },
          input: { payloads: [] },
          workflowTaskTimeout: { seconds: 10 },
          originalExecutionRunId: 'run-1',
          firstExecutionRunId: 'run-1',
          attempt: 1,
          identity: 'domain-test',
        },
      },
      {
        eventId: 2,
        eventTime,
        eventType: T.EVENT_TYPE_WORKFLOW_TASK_SCHEDULED,
        workflowTaskScheduledEventAttributes: {
          taskQueue: { name: 'domain-probe' },
          startToCloseTimeout: { seconds: 10 },
          attempt: 1,
        },
      },
      {
        eventId: 3,
        eventTime,
        eventType: T.EVENT_TYPE_WORKFLOW_TASK_STARTED,
        workflowTaskStartedEventAttributes: { scheduledEventId: 2, identity: 'domain-test', requestId: 'r' },
      },
    ],
  };
  return temporal.api.history.v1.History.create(history as unknown as proto.temporal.api.history.v1.IHistory);
}

describe('the domain core in the workflow sandbox', () => {
  it('computes in the sandbox exactly what it computes in Node', async () => {
    quietRuntime();
    const workflowBundle = await bundleWorkflowCode({
      workflowsPath: fileURLToPath(
        new URL('../test/support/domain/sandbox-probe.workflow.ts', import.meta.url),
      ),
      logger: new DefaultLogger('WARN'),
    });
    const reports: string[] = [];
    const sinks: InjectedSinks<ProbeSinks> = {
      probe: { report: { fn: (_info, result: string) => void reports.push(result), callDuringReplay: true } },
    };
    await Worker.runReplayHistory({ workflowBundle, sinks }, startedHistory('domainProbe'), 'domain-probe-1');
    expect(reports).toHaveLength(2);
    const inSandbox = JSON.parse(reports[0]!);
    const inNode = JSON.parse(JSON.stringify(runScenario()));
    expect(inSandbox).toEqual(inNode);
    // the scenario is not trivial
    const kinds = new Set((inNode.log as { kind: string }[]).map((d) => d.kind));
    expect([...kinds].sort()).toEqual(['enqueue', 'inject', 'observe', 'prune', 'retire', 'seed', 'select']);
    expect(inNode.gates.ok).toBe(true);
    expect(inNode.tooLong).toMatchObject({ ok: false, code: 'string-too-long' });
    // the ids (derived ids hash with @noble/hashes there and here)
    expect(JSON.parse(reports[1]!)).toEqual(idSamples());
  });

  it('imports nothing Node-only and reads no clock or randomness (static scan of domain/*.ts and the sandbox scenario)', () => {
    const dir = fileURLToPath(new URL('.', import.meta.url));
    const sources = [
      ...readdirSync(dir).filter((f) => f.endsWith('.ts') && !f.endsWith('.test.ts')),
      ...readdirSync(`${dir}/pool`)
        .filter((f) => f.endsWith('.ts') && !f.endsWith('.test.ts'))
        .map((f) => `pool/${f}`),
      // the sandbox scenario's own modules (test support, bundled into the probe workflow)
      ...readdirSync(`${dir}/../test/support/domain`).map((f) => `../test/support/domain/${f}`),
    ];
    expect(sources).toEqual(
      expect.arrayContaining([
        'step-plan.ts',
        'pool/state.ts',
        'pool/decisions.ts',
        'pool/evolve.ts',
        'pool/policy.ts',
      ]),
    );
    const forbidden = [
      /from ['"]node:/,
      /from ['"](fs|path|crypto|os|child_process|net|http|https|worker_threads)['"]/,
      /\brequire\(/,
      /\bDate\.now\b/,
      /\bnew Date\(/,
      /\bMath\.random\b/,
      /\bprocess\./,
      /\bBuffer\./,
      /\bset(Timeout|Interval|Immediate)\(/,
      /\bperformance\.now\b/,
    ];
    const hits: string[] = [];
    for (const f of sources) {
      const text = readFileSync(`${dir}/${f}`, 'utf8');
      for (const re of forbidden) if (re.test(text)) hits.push(`${f}: ${re}`);
    }
    expect(hits).toEqual([]);
  });
});
