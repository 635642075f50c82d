// The simulated trainer's client retries like a real trainer's: through 5xx, 429 and a gateway
// that is not listening, and not through other 4xx or when told to send once.

import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { candidateId, parentRef, variantCandidateId } from '../../domain/ids.js';
import { freePort } from '../../platform/util/free-port.js';
import { GatewayError, parentOf, SimulatedTrainer, type TaskRecord } from './trainer.js';

const servers: http.Server[] = [];
afterEach(async () => {
  await Promise.all(servers.splice(0).map((s) => new Promise((r) => s.close(r))));
});

/** A gateway that answers each request with the next status of the script (the last one repeats). */
async function scripted(statuses: number[], port = 0): Promise<{ url: string; hits: () => number }> {
  let hits = 0;
  const server = http.createServer((_req, res) => {
    const status = statuses[Math.min(hits++, statuses.length - 1)]!;
    res.writeHead(status, {
      'content-type': 'application/json',
      ...(status === 429 ? { 'retry-after': '0' } : {}),
    });
    res.end(JSON.stringify(status < 300 ? { duplicate: false } : { title: `status ${status}` }));
  });
  servers.push(server);
  await new Promise<void>((r) => server.listen(port, '127.0.0.1', r));
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, hits: () => hits };
}

const batch = { batchId: 'b', policyVersion: 'p', groups: [{ taskId: 't', rewards: [0.5] }], close: true };

describe('the simulated trainer client', () => {
  it('retries 503 and 429 until the gateway accepts', async () => {
    const g = await scripted([503, 429, 502, 202]);
    const t = new SimulatedTrainer({ gatewayUrl: g.url, token: 'x', campaignId: 'c' });
    await expect(t.postBatch(1, batch)).resolves.toEqual({ status: 202, duplicate: false });
    expect(g.hits()).toBe(4);
  });

  it('sends once when told not to retry, and never retries a 422', async () => {
    const g = await scripted([503, 202]);
    const t = new SimulatedTrainer({ gatewayUrl: g.url, token: 'x', campaignId: 'c' });
    const once = await t.postBatch(1, batch, { retry: false }).catch((e) => e);
    expect(once).toBeInstanceOf(GatewayError);
    expect((once as GatewayError).status).toBe(503);
    const bad = await scripted([422, 202]);
    const t2 = new SimulatedTrainer({ gatewayUrl: bad.url, token: 'x', campaignId: 'c' });
    await expect(t2.postBatch(1, batch)).rejects.toMatchObject({ status: 422 });
    expect(bad.hits()).toBe(1);
  });

  it('waits for a gateway that is not listening yet', async () => {
    const port = await freePort();
    const t = new SimulatedTrainer({ gatewayUrl: `http://127.0.0.1:${port}`, token: 'x', campaignId: 'c' });
    const sent = t.postBatch(1, batch);
    await new Promise((r) => setTimeout(r, 700));
    const g = await scripted([202], port);
    await expect(sent).resolves.toEqual({ status: 202, duplicate: false });
    expect(g.hits()).toBe(1);
  });

  it('gives up after retryForMs with the last error', async () => {
    const g = await scripted([503]);
    const t = new SimulatedTrainer({ gatewayUrl: g.url, token: 'x', campaignId: 'c', retryForMs: 300 });
    await expect(t.postBatch(1, batch)).rejects.toThrow(/503.*after \d+ attempts/);
  });
});

describe('the simulated trainer model', () => {
  const record = (id: string): TaskRecord => ({
    id,
    category: 'base',
    involved_classes: ['MathAPI'],
    ground_truth: [[], [], []],
  });

  it('samples a batch of B tasks of the pool per step (the whole of a smaller pool)', () => {
    const t = new SimulatedTrainer({
      gatewayUrl: 'http://x',
      token: 'x',
      campaignId: 'c',
      params: { batchTasks: 5 },
    });
    const pool = Array.from({ length: 12 }, (_, i) => record(`multi_turn_base_${i}`));
    const a = t.rollouts(1, pool);
    expect(a.groups).toHaveLength(5);
    for (const g of a.groups) expect(g.rewards).toHaveLength(16);
    expect(t.rollouts(2, pool).groups.map((g) => g.taskId)).not.toEqual(a.groups.map((g) => g.taskId));
    expect(t.rollouts(3, pool.slice(0, 3)).groups).toHaveLength(3);
  });

  it('names the parent of a synthesized task and of an Augment variant', () => {
    expect(parentOf('multi_turn_base_2')).toBeUndefined();
    expect(parentOf('multi_turn_base_2~s6')).toBe('multi_turn_base_2');
    expect(parentOf('multi_turn_base_2~s6~s14')).toBe('multi_turn_base_2~s6');
    expect(parentOf('multi_turn_miss_func_3~s6~miss_param')).toBe('multi_turn_miss_func_3');
    // A generated parent, named by root and key: found among the tasks seen.
    const parent = candidateId('multi_turn_base_2', 6);
    const child = candidateId(parent, 14);
    const byRef = new Map(
      [parent, 'multi_turn_base_2', candidateId('multi_turn_base_2', 7)].map((id) => [parentRef(id), id]),
    );
    expect(parentOf(child, byRef)).toBe(parent);
    expect(parentOf(variantCandidateId(child, 'miss_func'), byRef)).toBe(parent);
    expect(parentOf(candidateId(parent, 15), byRef)).toBe(parent);
    expect(parentOf(candidateId(candidateId('multi_turn_base_2', 7), 15), byRef)).toBe(
      candidateId('multi_turn_base_2', 7),
    );
  });
});
