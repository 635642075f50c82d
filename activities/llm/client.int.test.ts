import { randomUUID } from 'node:crypto';
import { cpSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import net from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { checkSchema } from '../../dev/standin/json-schema.js';
import { type StandinServer, startStandin } from '../../dev/standin/server.js';
import type { TaskRecord } from '../../domain/task.js';
import {
  DEFAULT_PROMPTS_DIR,
  loadPrompt,
  PROMPT_FILES,
  promptVersion,
} from '../../platform/config/prompts.js';
import { waitUntil } from '../../test/support/wait.js';
import { ExecutorClient } from '../executor-client.js';
import { chatJson, jsonSchemaOf, requestTimeoutMs, structuredOutputMode } from './client.js';
import { type GeneratorConfig, type GeneratorConfigInput, generatorConfig } from './config.js';
import { GeneratorOutputError, GeneratorRequestError, GeneratorUnavailableError } from './errors.js';
import { hashValue } from './json.js';
import { JudgementSchema, planBaseSchema } from './schemas.js';
import {
  draftCandidate,
  generateCalls,
  judge,
  patchConfig,
  plan,
  refine,
  renderInput,
  rewrite,
  taskView,
  withQuestion,
} from './stages.js';

// The client against the stand-in generator, started in this process on a free port; the seed
// tasks come from the environment executor of the local stack.
let server: StandinServer;
let seed: TaskRecord;

const cfgFor = (over: Partial<GeneratorConfigInput> = {}): GeneratorConfig =>
  generatorConfig({
    baseUrl: server.url,
    model: 'rods-standin-generator',
    backoffBaseMs: 5,
    backoffMaxMs: 20,
    timeoutMs: 30_000,
    ...over,
  });

/** Headers that inject `kind` into the first `count` requests of this test only. */
const fault = (kind: string, count?: number): Record<string, string> =>
  count === undefined
    ? { 'x-rods-fault': kind }
    : { 'x-rods-fault': kind, 'x-rods-fault-key': randomUUID(), 'x-rods-fault-count': String(count) };

/** The plan stage's messages, as the stage function builds them. */
function planMessages(task: TaskRecord) {
  const prompt = loadPrompt('plan');
  const schema = planBaseSchema();
  return {
    schema,
    messages: [
      { role: 'system' as const, content: prompt.text },
      {
        role: 'user' as const,
        content: renderInput({ seed: taskView(task), blocklist: [] }, jsonSchemaOf(schema)),
      },
    ],
  };
}

beforeAll(async () => {
  server = await startStandin({ port: 0, seed: 7 });
  seed = (await new ExecutorClient().seeds('base', 1))[0]!;
});

afterAll(async () => {
  await server?.close();
});

describe('stage functions against the stand-in', () => {
  it('runs every stage with schema-valid output and lineage facts', async () => {
    const cfg = cfgFor();
    const p = await plan(seed, { blocklist: [] }, cfg);
    expect(p.stage).toBe('plan');
    expect(p.model).toBe('rods-standin-generator');
    expect(p.promptHash).toBe(promptVersion('plan'));
    expect(p.outputHash).toBe(hashValue(p.value));
    expect(p.attempts).toBe(1);
    expect(p.value.functions.length).toBeGreaterThanOrEqual(2);
    expect(p.value.functions.length).toBeLessThanOrEqual(5);
    for (const turn of p.value.functions) {
      expect(turn.length).toBeGreaterThanOrEqual(1);
      expect(turn.length).toBeLessThanOrEqual(3);
      for (const f of turn) expect(seed.involved_classes).toContain(f.class);
    }

    const c = await generateCalls(p.value, seed, cfg);
    expect(c.stage).toBe('execute');
    expect(c.promptHash).toBe(promptVersion('params'));
    expect(c.value.ground_truth.map((t) => t.length)).toEqual(p.value.functions.map((t) => t.length));
    let candidate = draftCandidate(seed, c.value, { id: 'cand-client-1' });

    const w = await rewrite(candidate, cfg, { seedTask: seed, narrative: p.value.narrative });
    expect(w.stage).toBe('rewrite');
    expect(w.value.question).toHaveLength(candidate.ground_truth.length);
    candidate = withQuestion(candidate, w.value);

    const j = await judge(candidate, cfg);
    expect(j.stage).toBe('critique');
    expect(j.promptHash).toBe(promptVersion('judge'));
    expect(['accept', 'reject']).toContain(j.value.verdict);

    const r = await refine(
      candidate,
      { ...j.value, verdict: 'reject', scores: { ...j.value.scores, naturalness: 0.1 } },
      cfg,
    );
    expect(r.stage).toBe('refine');
    expect(r.value.classification).toBe('unnatural');
    expect(r.value.candidate.id).toBe(candidate.id);

    const failure = {
      turn: 0,
      index: 0,
      call: candidate.ground_truth[0]![0]!,
      reason: 'unrecognised',
      kind: 'execution' as const,
    };
    const patched = await patchConfig(candidate, failure, cfg, { repair: 1 });
    expect(patched.stage).toBe('execute');
    expect(patched.promptHash).toBe(promptVersion('config-patch'));
    expect(
      Object.keys(patched.value.initial_config).every((k) => candidate.involved_classes.includes(k)),
    ).toBe(true);
  });

  it('records the hash of the prompt file it sent (an edited copy gives another hash)', async () => {
    const dir = mkdtempSync(path.join(tmpdir(), 'rods-prompts-'));
    try {
      cpSync(DEFAULT_PROMPTS_DIR, dir, { recursive: true });
      const file = path.join(dir, PROMPT_FILES.plan);
      writeFileSync(file, `${readFileSync(file, 'utf8')}\nKeep the narrative under three sentences.\n`);
      const r = await plan(seed, {}, cfgFor({ promptsDir: dir }));
      expect(r.promptHash).toBe(promptVersion('plan', dir));
      expect(r.promptHash).not.toBe(promptVersion('plan'));
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('answers response_format json_schema with content that matches the schema it was sent', async () => {
    const { schema, messages } = planMessages(seed);
    const r = await chatJson('plan', messages, schema, cfgFor());
    expect(checkSchema(JSON.parse(r.raw), jsonSchemaOf(schema))).toEqual([]);
  });

  it('works with json_object and with no response_format (a fenced reply)', async () => {
    const { schema, messages } = planMessages(seed);
    const asObject = await chatJson('plan', messages, schema, cfgFor({ structuredOutput: 'json_object' }));
    const plain = await chatJson('plan', messages, schema, cfgFor({ structuredOutput: 'none' }));
    expect(plain.raw.startsWith('```json')).toBe(true);
    expect(plain.value).toEqual(asObject.value);
  });

  it('uses the judge model for the judge stage', async () => {
    const { schema, messages } = planMessages(seed);
    const before = server.stats.models['some-judge'] ?? 0;
    // The stand-in answers any model name and reports its own id.
    const r = await chatJson('judge', messages, schema, cfgFor({ judgeModel: 'some-judge' }));
    expect(r.model).toBe('rods-standin-generator');
    expect(server.stats.models['some-judge']).toBe(before + 1);
    expect(cfgFor({ judgeModel: 'some-judge' }).judgeModel).toBe('some-judge');
    expect(cfgFor().judgeModel).toBe('rods-standin-generator');
  });
});

describe('transient failures', () => {
  it('retries HTTP 5xx with backoff, heartbeating, then succeeds', async () => {
    const { schema, messages } = planMessages(seed);
    let beats = 0;
    const r = await chatJson('plan', messages, schema, cfgFor({ headers: fault('5xx', 2) }), {
      heartbeat: () => beats++,
    });
    expect(r.requests).toBe(3);
    expect(r.attempts).toBe(1);
    expect(r.backoffMs).toBeGreaterThan(0);
    expect(beats).toBeGreaterThanOrEqual(3); // at the start and before each of the two retries
  });

  it('gives up with GeneratorUnavailableError (retryable) when 5xx outlasts the retry budget', async () => {
    const { schema, messages } = planMessages(seed);
    const err = await chatJson(
      'plan',
      messages,
      schema,
      cfgFor({ headers: fault('5xx'), transientRetries: 2 }),
    ).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(GeneratorUnavailableError);
    const e = err as GeneratorUnavailableError;
    expect(e.retryable).toBe(true);
    expect(e.name).toBe('GeneratorUnavailableError');
    expect(e.requests).toBe(3);
    expect(e.lastStatus).toBe(503);
  });

  it('times out a hanging request and succeeds on the retry', async () => {
    const { schema, messages } = planMessages(seed);
    const r = await chatJson(
      'plan',
      messages,
      schema,
      cfgFor({ headers: fault('timeout', 1), timeoutMs: 500 }),
    );
    expect(r.requests).toBe(2);
    expect(r.value.functions.length).toBeGreaterThanOrEqual(2);
  });

  it('honours Retry-After of a 429', async () => {
    const { schema, messages } = planMessages(seed);
    const r = await chatJson('plan', messages, schema, cfgFor({ headers: fault('429', 1) }), {
      random: () => 0,
    });
    expect(r.requests).toBe(2);
    // The stand-in asks for 200 ms; the computed backoff alone would be 2.5 ms.
    expect(r.backoffMs).toBeGreaterThanOrEqual(200);
  });

  it('retries a refused connection, then reports the generator unavailable', async () => {
    const port = await new Promise<number>((resolve) => {
      const s = net.createServer().listen(0, '127.0.0.1', () => {
        const p = (s.address() as net.AddressInfo).port;
        s.close(() => resolve(p));
      });
    });
    const { schema, messages } = planMessages(seed);
    const cfg = generatorConfig({
      baseUrl: `http://127.0.0.1:${port}/v1`,
      model: 'x',
      transientRetries: 1,
      backoffBaseMs: 1,
    });
    const err = await chatJson('plan', messages, schema, cfg).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(GeneratorUnavailableError);
    expect((err as GeneratorUnavailableError).message).toMatch(/connection failed/);
    expect((err as GeneratorUnavailableError).requests).toBe(2);
  });

  it('stops at once when the caller cancels', async () => {
    const { schema, messages } = planMessages(seed);
    const ac = new AbortController();
    const before = server.stats.requests;
    const pending = chatJson('plan', messages, schema, cfgFor({ headers: fault('timeout') }), {
      signal: ac.signal,
    });
    // Cancel once the request is at the server (it hangs there), not after a guessed delay.
    await waitUntil(() => server.stats.requests > before, {
      what: 'the hanging request to reach the stand-in',
    });
    ac.abort(new Error('activity cancelled'));
    await expect(pending).rejects.toThrow('activity cancelled');
  });
});

describe('invalid answers', () => {
  it('re-asks after malformed JSON and accepts the next answer, keeping the refused one', async () => {
    const { schema, messages } = planMessages(seed);
    const r = await chatJson('plan', messages, schema, cfgFor({ headers: fault('malformed', 1) }));
    expect(r.attempts).toBe(2);
    expect(r.refused).toHaveLength(1);
    expect(r.refused[0]!.raw.length).toBeGreaterThan(0);
    expect(r.refused[0]!.issues.length).toBeGreaterThan(0);
    expect(r.value.functions.length).toBeGreaterThanOrEqual(2);
    // The tokens of both answers: the re-ask sends the first answer and the feedback back.
    const once = await chatJson('plan', messages, schema, cfgFor({}));
    expect(once.usage!.promptTokens).toBeGreaterThan(0);
    expect(r.usage!.promptTokens).toBeGreaterThan(2 * once.usage!.promptTokens);
    expect(r.usage!.completionTokens).toBeGreaterThan(once.usage!.completionTokens);
  });

  it('throws GeneratorOutputError with the raw text when every answer is malformed', async () => {
    const { schema, messages } = planMessages(seed);
    const err = await chatJson(
      'plan',
      messages,
      schema,
      cfgFor({ headers: fault('malformed'), maxAttempts: 3 }),
      { promptHash: promptVersion('plan') },
    ).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(GeneratorOutputError);
    const e = err as GeneratorOutputError;
    // the prompt it was asked with, for StageFailed.promptVersionHash
    expect(e.promptHash).toBe(promptVersion('plan'));
    expect(e.retryable).toBe(false);
    expect(e.name).toBe('GeneratorOutputError');
    expect(e.attempts).toHaveLength(3);
    expect(e.raw).toBe(e.attempts[2]!.raw);
    expect(e.raw.length).toBeGreaterThan(0);
    expect(e.issues.length).toBeGreaterThan(0);
    expect(e.stage).toBe('plan');
    // The three refused answers were paid for: their tokens travel with the error.
    const once = await chatJson('plan', messages, schema, cfgFor({}));
    expect(e.usage!.promptTokens).toBeGreaterThan(2 * once.usage!.promptTokens);
    expect(e.usage!.completionTokens).toBeGreaterThan(0);
  });

  it('refuses JSON that breaks the schema (a judge shape asked of the plan prompt)', async () => {
    const { messages } = planMessages(seed);
    const err = await chatJson(
      'plan',
      messages,
      JudgementSchema,
      cfgFor({ structuredOutput: 'json_object', maxAttempts: 2 }),
    ).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(GeneratorOutputError);
    expect((err as GeneratorOutputError).issues.join('\n')).toMatch(/verdict/);
  });

  it('reports a request the endpoint refuses as GeneratorRequestError, without retrying', async () => {
    const before = server.stats.requests;
    const err = await chatJson(
      'plan',
      [{ role: 'user', content: 'hello' }],
      planBaseSchema(),
      cfgFor(),
    ).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(GeneratorRequestError);
    expect((err as GeneratorRequestError).status).toBe(400);
    expect((err as GeneratorRequestError).retryable).toBe(false);
    // No transient retry: one request per structured-output mode, and no step down remembered.
    expect(server.stats.requests - before).toBe(3);
    expect(structuredOutputMode(cfgFor(), 'rods-standin-generator')).toBe('json_schema');
  });

  it('the judge rejects on request (fault reject) with a low score and a reason', async () => {
    const cfg = cfgFor();
    const p = await plan(seed, {}, cfg);
    const c = await generateCalls(p.value, seed, cfg);
    const w = await rewrite(draftCandidate(seed, c.value, { id: 'cand-reject' }), cfg, { seedTask: seed });
    const candidate = withQuestion(draftCandidate(seed, c.value, { id: 'cand-reject' }), w.value);
    const j = await judge(candidate, cfgFor({ headers: fault('reject') }));
    expect(j.value.verdict).toBe('reject');
    expect(Math.min(...Object.values(j.value.scores))).toBeLessThan(0.5);
    expect(j.value.reasons.join(' ')).toMatch(/injected/);
  });
});

describe('behaviours of a real vLLM (stand-in faults)', () => {
  it('steps down to json_object when the server refuses the JSON schema, validates with zod, and remembers it', async () => {
    const { schema, messages } = planMessages(seed);
    // Its own model name: the step down is remembered per endpoint and model.
    const cfg = cfgFor({ model: 'schema-refusing', headers: fault('refuse-schema') });
    const before = server.stats.requests;
    const r = await chatJson('plan', messages, schema, cfg);
    expect(r.requests).toBe(2);
    expect(server.stats.requests - before).toBe(2);
    expect(schema.safeParse(r.value).success).toBe(true);
    expect(structuredOutputMode(cfg, 'schema-refusing')).toBe('json_object');
    const again = await chatJson('plan', messages, schema, cfg);
    expect(again.requests).toBe(1);
    expect(again.value).toEqual(r.value);
  });

  it('reads the answer apart from reasoning (and the older reasoning_content) and from inline <think> tags', async () => {
    const { schema, messages } = planMessages(seed);
    const plain = await chatJson('plan', messages, schema, cfgFor());
    for (const kind of ['reasoning', 'reasoning-legacy', 'think-tags']) {
      const r = await chatJson('plan', messages, schema, cfgFor({ headers: fault(kind) }));
      expect(r.attempts).toBe(1);
      expect(r.value).toEqual(plain.value);
      expect(r.raw.includes('<think>')).toBe(false);
    }
  });

  it('sets the token limit as max_completion_tokens, not the deprecated max_tokens', async () => {
    const { schema, messages } = planMessages(seed);
    const before = { requests: server.stats.requests, deprecated: server.stats.deprecatedMaxTokens };
    await chatJson('plan', messages, schema, cfgFor());
    expect(server.stats.requests).toBeGreaterThan(before.requests);
    expect(server.stats.deprecatedMaxTokens).toBe(before.deprecated);
  });

  it('names a model that spent its token limit reasoning without an answer', async () => {
    const { schema, messages } = planMessages(seed);
    const err = await chatJson(
      'plan',
      messages,
      schema,
      cfgFor({ headers: fault('think-length'), maxAttempts: 2 }),
    ).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(GeneratorOutputError);
    expect(String((err as Error).message)).toMatch(/spent max_completion_tokens \(4096\) reasoning/);
  });

  it('sizes the request time limit from max_tokens at the slowest expected speed, unless configured', () => {
    const derived = (over: Partial<GeneratorConfigInput>) =>
      requestTimeoutMs(generatorConfig({ baseUrl: 'http://127.0.0.1:1/v1', model: 'm', ...over }));
    expect(derived({ maxTokens: 4096 })).toBe(204_800);
    expect(derived({ maxTokens: 1024 })).toBe(120_000);
    expect(derived({ maxTokens: 8192, minTokensPerSecond: 10 })).toBe(819_200);
    expect(derived({ maxTokens: 8192, timeoutMs: 5000 })).toBe(5000);
  });
});
