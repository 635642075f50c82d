import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ExecutorClient } from '../../activities/executor-client.js';
import { jsonSchemaOf } from '../../activities/llm/client.js';
import { JudgementSchema, planBaseSchema } from '../../activities/llm/schemas.js';
import { renderInput, taskView } from '../../activities/llm/stages.js';
import type { TaskRecord } from '../../domain/task.js';
import { loadPrompt } from '../../platform/config/prompts.js';
import { waitUntil } from '../../test/support/wait.js';
import { checkSchema } from './json-schema.js';
import { STANDIN_MODEL, type StandinServer, startStandin } from './server.js';

// The stand-in's HTTP surface, spoken to with plain fetch.
const servers: StandinServer[] = [];
let seeds: TaskRecord[];

async function start(opts: Parameters<typeof startStandin>[0] = {}): Promise<StandinServer> {
  const s = await startStandin({ port: 0, ...opts });
  servers.push(s);
  return s;
}

function planBody(task: TaskRecord, extra: Record<string, unknown> = {}) {
  const schema = jsonSchemaOf(planBaseSchema());
  return {
    model: STANDIN_MODEL,
    messages: [
      { role: 'system', content: loadPrompt('plan').text },
      { role: 'user', content: renderInput({ seed: taskView(task), blocklist: [] }, schema) },
    ],
    response_format: { type: 'json_schema', json_schema: { name: 'plan', schema } },
    ...extra,
  };
}

interface Answer {
  choices: { message: { content: string }; finish_reason: string }[];
  model: string;
  object: string;
  error: { message: string; type: string };
}

async function post(
  s: StandinServer,
  body: unknown,
  headers: Record<string, string> = {},
  signal?: AbortSignal,
) {
  const res = await fetch(`${s.url}/chat/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...headers },
    body: JSON.stringify(body),
    signal,
  });
  return { status: res.status, headers: res.headers, json: (await res.json()) as Answer };
}

const contentOf = (r: { json: Answer }): string => r.json.choices[0]!.message.content;

beforeAll(async () => {
  seeds = await new ExecutorClient().seeds('base', 10);
});
afterAll(async () => {
  for (const s of servers) await s.close();
});

describe('stand-in generator HTTP API', () => {
  it('lists its model and says it is a stand-in', async () => {
    const s = await start();
    const models = (await (await fetch(`${s.url}/models`)).json()) as {
      data: { id: string; owned_by: string }[];
    };
    expect(models.data.map((m) => m.id)).toEqual([STANDIN_MODEL]);
    expect(models.data[0]!.owned_by).toMatch(/stand-in/);
    const r = await post(s, planBody(seeds[0]!));
    expect(r.status).toBe(200);
    expect(r.json.model).toBe(STANDIN_MODEL);
    expect(r.json.object).toBe('chat.completion');
    expect(r.json.choices[0]!.finish_reason).toBe('stop');
  });

  it('is deterministic: same request and server seed → same answer; the seed parameter and server seed vary it', async () => {
    const a = await start({ seed: 1 });
    const b = await start({ seed: 2 });
    const differsBySeedParam: boolean[] = [];
    const differsByServerSeed: boolean[] = [];
    for (const task of seeds) {
      const first = contentOf(await post(a, planBody(task, { seed: 11 })));
      expect(contentOf(await post(a, planBody(task, { seed: 11 })))).toBe(first);
      const noSeed = contentOf(await post(a, planBody(task)));
      expect(contentOf(await post(a, planBody(task)))).toBe(noSeed);
      differsBySeedParam.push(contentOf(await post(a, planBody(task, { seed: 12 }))) !== first);
      differsByServerSeed.push(contentOf(await post(b, planBody(task, { seed: 11 }))) !== first);
    }
    expect(differsBySeedParam).toContain(true);
    expect(differsByServerSeed).toContain(true);
  });

  it('answers json_schema requests with matching content, and falls back to a schema instance for a foreign schema', async () => {
    const s = await start();
    const r = await post(s, planBody(seeds[1]!));
    expect(checkSchema(JSON.parse(contentOf(r)), jsonSchemaOf(planBaseSchema()))).toEqual([]);
    const foreign = jsonSchemaOf(JudgementSchema);
    const f = await post(
      s,
      planBody(seeds[1]!, {
        response_format: { type: 'json_schema', json_schema: { name: 'x', schema: foreign } },
      }),
    );
    expect(checkSchema(JSON.parse(contentOf(f)), foreign)).toEqual([]);
    expect(f.headers.get('x-rods-standin-note')).toMatch(/schema-fallback/);
  });

  it('refuses requests that are not rods stage prompts, streaming, and malformed bodies', async () => {
    const s = await start();
    const noMarker = await post(s, { model: 'x', messages: [{ role: 'user', content: 'hi' }] });
    expect(noMarker.status).toBe(400);
    expect(noMarker.json.error.message).toMatch(/rods-stage/);
    expect((await post(s, { ...planBody(seeds[0]!), stream: true })).status).toBe(400);
    expect((await post(s, { model: 'x' })).status).toBe(400);
    const noInput = await post(s, {
      model: 'x',
      messages: [{ role: 'system', content: loadPrompt('plan').text }],
    });
    expect(noInput.status).toBe(400);
    expect(noInput.json.error.message).toMatch(/plan input/);
  });

  it('injects faults per request: 5xx, 429 with Retry-After, malformed, and only the first N of a key', async () => {
    const s = await start();
    const body = planBody(seeds[2]!);
    const e = await post(s, body, { 'x-rods-fault': '5xx' });
    expect(e.status).toBe(503);
    expect(e.json.error.type).toBe('server_error');
    const rl = await post(s, body, { 'x-rods-fault': '429' });
    expect(rl.status).toBe(429);
    expect(rl.headers.get('retry-after-ms')).toBe('200');
    const bad = await post(s, body, { 'x-rods-fault': 'malformed' });
    expect(bad.status).toBe(200);
    expect(contentOf(bad)).not.toBe(contentOf(await post(s, body)));
    const statuses: number[] = [];
    for (let i = 0; i < 4; i++) {
      statuses.push(
        (await post(s, body, { 'x-rods-fault': '5xx', 'x-rods-fault-key': 'k1', 'x-rods-fault-count': '2' }))
          .status,
      );
    }
    expect(statuses).toEqual([503, 503, 200, 200]);
    expect(s.stats.faults['5xx']).toBe(3);
  });

  it('hangs a timeout fault until the client gives up, and closes cleanly with a request hanging', async () => {
    const s = await start();
    await expect(
      post(s, planBody(seeds[0]!), { 'x-rods-fault': 'timeout' }, AbortSignal.timeout(200)),
    ).rejects.toThrow();
    const pending = post(s, planBody(seeds[0]!), { 'x-rods-fault': 'timeout' }).catch((e: unknown) => e);
    await waitUntil(() => s.stats.requests >= 2, {
      what: 'the second hanging request to reach the stand-in',
    });
    await s.close();
    expect(await pending).toBeInstanceOf(Error);
  });

  it('injects faults by rate', async () => {
    const failing = await start({ failRate: 1 });
    const malformed = await start({ malformedRate: 1 });
    for (const task of seeds.slice(0, 3)) {
      expect((await post(failing, planBody(task))).status).toBe(503);
      const r = await post(malformed, planBody(task));
      const content = contentOf(r);
      const valid = (() => {
        try {
          return checkSchema(JSON.parse(content), jsonSchemaOf(planBaseSchema())).length === 0;
        } catch {
          return false;
        }
      })();
      expect(valid).toBe(false);
    }
  });
});
