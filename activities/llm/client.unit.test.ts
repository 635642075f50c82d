// chatJson's classification of requests that do not fit the model's context length, against an
// in-process server that answers as vLLM 0.32 does (its messages verbatim; the real server:
// infra/stack/vllm.int.test.ts): a prompt over the length is refused with 400, a prompt that fits
// while its max tokens do not is answered until the length is full (finish_reason "length").
import Fastify, { type FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { chatJson } from './client.js';
import { generatorConfig } from './config.js';
import { GeneratorOutputError, GeneratorRequestError, isContextLengthRefusal } from './errors.js';

const TOO_LONG =
  "This model's maximum context length is 16384 tokens. However, your prompt contains at least 16385 input tokens, which exceeds this limit even without any output tokens. Please reduce the length of the input prompt. (parameter=input_tokens, value=16385)";

let app: FastifyInstance;
let base = '';
const asked: { path: string; response_format?: { type?: string }; messages: unknown[] }[] = [];

const completion = (content: string, finish: string, promptTokens: number, completionTokens: number) => ({
  id: 'c1',
  object: 'chat.completion',
  created: 0,
  model: 'm',
  choices: [{ index: 0, message: { role: 'assistant', content }, finish_reason: finish }],
  usage: {
    prompt_tokens: promptTokens,
    completion_tokens: completionTokens,
    total_tokens: promptTokens + completionTokens,
  },
});

beforeAll(async () => {
  app = Fastify({ forceCloseConnections: true });
  app.post<{ Params: { mode: string } }>('/:mode/v1/chat/completions', async (req, reply) => {
    const body = req.body as (typeof asked)[number];
    asked.push({ ...body, path: req.params.mode });
    const refuse = () =>
      reply.code(400).send({
        error: { message: TOO_LONG, type: 'BadRequestError', param: 'input_tokens', code: 400 },
      });
    switch (req.params.mode) {
      case 'over':
        return refuse();
      case 'full':
        // 4 tokens were left after the prompt.
        return completion('{"ok": tr', 'length', 16380, 4);
      case 'schema':
        // A refusal that is not about the length: stepped down through the modes as before.
        return reply.code(400).send({ error: { message: 'unsupported keyword pattern' } });
      default:
        // "reask": a long answer that breaks the schema; its re-ask no longer fits.
        return body.messages.length > 1 ? refuse() : completion('{"wrong": 1}', 'stop', 9000, 7000);
    }
  });
  await app.listen({ host: '127.0.0.1', port: 0 });
  const addr = app.server.address();
  base = `http://127.0.0.1:${typeof addr === 'object' && addr ? addr.port : 0}`;
});

afterAll(async () => {
  await app?.close();
});

const Ok = z.object({ ok: z.boolean() });
const cfgAt = (mode: string) =>
  generatorConfig({
    baseUrl: `${base}/${mode}/v1`,
    model: 'm',
    maxTokens: 256,
    maxAttempts: 3,
    timeoutMs: 10_000,
  });
const requestsTo = (mode: string) => asked.filter((a) => a.path === mode);
const failure = (mode: string) =>
  chatJson('judge', [{ role: 'user', content: 'x' }], Ok, cfgAt(mode)).then(
    () => {
      throw new Error('answered');
    },
    (e: unknown) => e,
  );

describe('chatJson and the context length', () => {
  it('refuses a prompt over the context length at once, naming the cause, in no other mode', async () => {
    const e = await failure('over');
    expect(e).toBeInstanceOf(GeneratorRequestError);
    const r = e as GeneratorRequestError;
    expect(r.retryable).toBe(false);
    expect(r.reason).toBe('context-length');
    expect(r.message).toBe(
      `the generator at ${base} refused stage judge: the request does not fit the model's context length ` +
        `(its prompt plus max_completion_tokens 256); shorten the prompt or lower generator.maxTokens. The server said: ${TOO_LONG}`,
    );
    expect(requestsTo('over').map((a) => a.response_format?.type)).toEqual(['json_schema']);
  });

  it('ends a stage whose answer filled the context at once, naming the length and keeping its tokens', async () => {
    const e = await failure('full');
    expect(e).toBeInstanceOf(GeneratorOutputError);
    const o = e as GeneratorOutputError;
    expect(o.retryable).toBe(false);
    expect(o.issues).toEqual([
      "the answer was cut off at the model's context length after 4 of max_completion_tokens (256): the prompt's 16380 tokens left no more room; shorten the prompt or lower generator.maxTokens",
    ]);
    expect(o.attempts).toHaveLength(1);
    expect(o.usage).toEqual({ promptTokens: 16380, completionTokens: 4 });
    expect(requestsTo('full')).toHaveLength(1);
  });

  it('ends a stage whose re-ask no longer fits with the refused answers and their tokens', async () => {
    const e = await failure('reask');
    expect(e).toBeInstanceOf(GeneratorOutputError);
    const o = e as GeneratorOutputError;
    expect(o.attempts).toHaveLength(1);
    expect(o.issues.at(-1)).toBe(
      `re-asking with this answer does not fit the model's context length (${TOO_LONG})`,
    );
    expect(o.usage).toEqual({ promptTokens: 9000, completionTokens: 7000 });
    expect(requestsTo('reask')).toHaveLength(2);
  });

  it('still steps down through the structured-output modes on another 400', async () => {
    const e = await failure('schema');
    expect(e).toBeInstanceOf(GeneratorRequestError);
    expect((e as GeneratorRequestError).reason).toBeUndefined();
    expect(requestsTo('schema').map((a) => a.response_format?.type)).toEqual([
      'json_schema',
      'json_object',
      undefined,
    ]);
  });

  it("tells vLLM's and OpenAI's context-length refusals from other 400s", () => {
    expect(isContextLengthRefusal(400, TOO_LONG)).toBe(true);
    expect(
      isContextLengthRefusal(
        400,
        'max_completion_tokens=20000 cannot be greater than max_model_len=16384. Please request fewer output tokens.',
      ),
    ).toBe(true);
    expect(isContextLengthRefusal(400, 'context_length_exceeded')).toBe(true);
    expect(isContextLengthRefusal(400, 'unsupported keyword pattern')).toBe(false);
    expect(isContextLengthRefusal(500, TOO_LONG)).toBe(false);
  });
});
