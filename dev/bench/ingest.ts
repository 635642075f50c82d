// Ingestion through the gateway: POST a step of 800 tasks x 16 rewards (validation, claim check in
// PostgreSQL, RolloutGroupScored + StepClosed published with an idempotent producer by the gateway,
// or by the batch's ingestion workflow when the gateway could not) until its records are on the
// topic: the 202 when it says published, else the workflow's completion. Against, in the same
// run, publishing the same records straight to Kafka with an idempotent producer.
// ratio = raw_produce_p50_ms / p50_step_ms. --profile DIR: a CPU profile of the gateway steps (this
// process runs the client and the gateway) and its top frames.
import { randomUUID } from 'node:crypto';
import { workflowIds } from '../../domain/ids.js';
import { encode } from '../../platform/codec/registry.js';
import { openKafka } from '../../platform/kafka/client.js';
import { migrate } from '../../platform/store/migrate.js';
import { installNodeSha256 } from '../../platform/util/node-sha256.js';
import { startGatewayWithWorker } from '../../test/support/gateway/gateway-with-worker.js';
import { profiled } from './profile.js';
import type { BenchResult } from './result.js';

function pct(xs: number[], p: number): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.max(0, Math.ceil((p / 100) * s.length) - 1))]!;
}

export default async function ingestBench(opts: Record<string, string | boolean>): Promise<BenchResult> {
  const steps = Number(opts.steps ?? 20);
  const tasks = Number(opts.tasks ?? 800);
  const k = 16;
  await migrate();
  // As in every rods process (entry/cli/main.ts): node:crypto behind the derived event ids.
  installNodeSha256();
  const token = randomUUID();
  // The gateway with an in-process worker and a fresh 6-partition rewards topic, as its HTTP tests run it.
  const gw = await startGatewayWithWorker({
    application: 'rods-bench-ingest',
    tokens: [token],
    name: 'bench-ingest',
    partitions: 6,
  });
  const { base, topic, client } = gw;
  const campaignId = `bench-ingest-${randomUUID().slice(0, 8)}`;
  const headers = { authorization: `Bearer ${token}`, 'content-type': 'application/json' };
  try {
    const created = await fetch(`${base}/v1/campaigns`, {
      method: 'POST',
      headers,
      // Tasks named by the bench, not drawn from a pool: accepted without the pool check.
      body: JSON.stringify({
        campaignId,
        config: { seeds: { perCategory: 1 }, ingestion: { unknownTasks: 'accept' } },
      }),
    });
    if (created.status !== 201) throw new Error(`campaign: ${created.status} ${await created.text()}`);
    const rewards = (step: number, t: number) =>
      Array.from({ length: k }, (_, i) => ((step * 31 + t * 7 + i) % 17) / 16);
    const stepMs: number[] = [];
    const acceptMs: number[] = [];
    let viaWorkflow = 0;
    const t0 = performance.now();
    const { top } = await profiled(opts, 'ingest', async () => {
      for (let step = 1; step <= steps; step++) {
        const body = {
          batchId: `b${step}`,
          policyVersion: `p${step}`,
          close: true,
          groups: Array.from({ length: tasks }, (_, t) => ({
            taskId: `task-${t}`,
            rewards: rewards(step, t),
          })),
        };
        const s0 = performance.now();
        const r = await fetch(`${base}/v1/campaigns/${campaignId}/steps/${step}/rollouts`, {
          method: 'POST',
          headers,
          body: JSON.stringify(body),
        });
        if (r.status !== 202) throw new Error(`step ${step}: ${r.status} ${await r.text()}`);
        const { workflowId, published } = (await r.json()) as { workflowId: string; published: boolean };
        acceptMs.push(performance.now() - s0);
        if (!published) {
          viaWorkflow++;
          await client.workflow.getHandle(workflowId).result();
        }
        stepMs.push(performance.now() - s0);
      }
    });
    const seconds = (performance.now() - t0) / 1000;

    // Baseline: the same records straight to Kafka.
    const p = await openKafka({ clientId: 'bench-raw-produce' }).producer({ idempotent: true });
    const rawMs: number[] = [];
    for (let step = 1; step <= steps; step++) {
      const s0 = performance.now();
      const messages = Array.from({ length: tasks }, (_, t) => ({
        key: `task-${t}`,
        value: encode('RolloutGroupScored', {
          eventId: randomUUID(),
          campaignId: `${campaignId}-raw`,
          taskId: `task-${t}`,
          step,
          policyVersion: `p${step}`,
          rewards: rewards(step, t),
          producedAt: Date.now(),
        }),
      }));
      messages.push({
        key: `${campaignId}-raw`,
        value: encode('StepClosed', {
          eventId: randomUUID(),
          campaignId: `${campaignId}-raw`,
          step,
          groupCount: tasks,
          producedAt: Date.now(),
        }),
      });
      await p.send(topic, messages);
      rawMs.push(performance.now() - s0);
    }
    await p.disconnect();
    const p50 = pct(stepMs, 50);
    const raw50 = pct(rawMs, 50);
    return {
      steps,
      tasks_per_step: tasks,
      rewards_per_task: k,
      steps_per_s: Number((steps / seconds).toFixed(2)),
      p50_step_ms: Math.round(p50),
      p99_step_ms: Math.round(pct(stepMs, 99)),
      // the POST until its 202 (validation, claim check, the gateway's publish or the workflow's start)
      p50_accept_ms: Math.round(pct(acceptMs, 50)),
      // steps the gateway left to their ingestion workflow (its direct publish failed)
      steps_via_workflow: viaWorkflow,
      raw_produce_p50_ms: Math.round(raw50),
      ratio: Number((raw50 / p50).toFixed(3)),
      ...(top ? { profile_top: top } : {}),
    };
  } finally {
    await gw.close([workflowIds.campaign(campaignId)]);
  }
}
