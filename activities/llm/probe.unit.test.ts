// The generator probe of `rods doctor` against an in-process OpenAI-compatible server on an
// ephemeral port: a conforming answer, text that is not the schema's JSON, a refused key, a hang
// past the time limit and a closed port each get their status and reason, and the API key never
// appears in what doctor prints (JSON or human), even when the server echoes it.
import { createServer } from 'node:net';
import Fastify, { type FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { STANDIN_MODEL, startStandin } from '../../dev/standin/server.js';
import { checkGenerators, renderCheck } from '../../entry/cli/commands/doctor.js';
import { probeGenerator, shownBaseUrl } from './probe.js';

const KEY = 'sk-doctor-secret-0123456789';
const MODEL = 'probe-model';

let app: FastifyInstance;
let base = '';
const asked: { model?: string; response_format?: { type?: string } }[] = [];

const completion = (content: string, finish = 'stop') => ({
  id: 'c1',
  object: 'chat.completion',
  created: 0,
  model: MODEL,
  choices: [{ index: 0, message: { role: 'assistant', content }, finish_reason: finish }],
  usage: { prompt_tokens: 31, completion_tokens: 7, total_tokens: 38 },
});

/** One server, one behaviour per path prefix: /ok, /text, /cut, /auth, /hang, /busy. */
beforeAll(async () => {
  app = Fastify({ forceCloseConnections: true });
  app.get<{ Params: { mode: string } }>('/:mode/v1/models', async (req) =>
    req.params.mode === 'hang-all'
      ? new Promise(() => {})
      : { object: 'list', data: [{ id: MODEL, object: 'model' }] },
  );
  app.post<{ Params: { mode: string } }>('/:mode/v1/chat/completions', async (req, reply) => {
    asked.push(req.body as (typeof asked)[number]);
    switch (req.params.mode) {
      case 'ok':
        return completion('{"ok": true}');
      case 'text':
        return completion('Hello! I am doing fine, thanks for asking.');
      case 'cut':
        return completion('{"ok": ', 'length');
      case 'auth':
        if (req.headers.authorization === `Bearer ${KEY}`) return completion('{"ok": true}');
        // As some servers do: the refused key, echoed.
        return reply
          .code(401)
          .send({ error: { message: `Incorrect API key provided: ${KEY}`, type: 'invalid_request_error' } });
      case 'busy':
        return reply.code(429).send({ error: { message: 'slow down' } });
      default:
        return new Promise(() => {}); // hangs
    }
  });
  await app.listen({ host: '127.0.0.1', port: 0 });
  const addr = app.server.address();
  base = `http://127.0.0.1:${typeof addr === 'object' && addr ? addr.port : 0}`;
});

afterAll(async () => {
  await app?.close();
});

const endpoint = (mode: string, apiKey?: string) => ({
  name: 'default',
  baseUrl: `${base}/${mode}/v1`,
  headers: {},
  ...(apiKey !== undefined ? { apiKey } : {}),
});

async function closedPort(): Promise<number> {
  const s = createServer();
  await new Promise<void>((r) => s.listen(0, '127.0.0.1', r));
  const port = (s.address() as { port: number }).port;
  await new Promise<void>((r) => s.close(() => r()));
  return port;
}

describe('the generator probe', () => {
  it('a conforming answer: ok, the listed model, usage, one json_schema request', async () => {
    asked.length = 0;
    const p = await probeGenerator(endpoint('ok', KEY), { timeoutMs: 5_000 });
    expect(p).toMatchObject({
      status: 'ok',
      conformed: true,
      usage: { promptTokens: 31, completionTokens: 7 },
      endpoint: { name: 'default', baseUrl: `${base}/ok/v1`, model: MODEL, modelFrom: 'endpoint' },
    });
    expect(p.reason).toBeUndefined();
    expect(p.detail).toMatch(/answered JSON matching the schema; 31 prompt \+ 7 completion tokens$/);
    expect(asked).toHaveLength(1);
    expect(asked[0]).toMatchObject({ model: MODEL, response_format: { type: 'json_schema' } });
  });

  it('the model given is asked without listing', async () => {
    asked.length = 0;
    const p = await probeGenerator(endpoint('ok'), { model: 'other', timeoutMs: 5_000 });
    expect(p.endpoint).toMatchObject({ model: 'other', modelFrom: 'flag' });
    expect(asked.map((a) => a.model)).toEqual(['other']);
  });

  it('text that is not the JSON asked for: a warning, not conforming, with its tokens', async () => {
    const p = await probeGenerator(endpoint('text'), { timeoutMs: 5_000 });
    expect(p).toMatchObject({
      status: 'warn',
      reason: 'non-conforming',
      error: 'GeneratorOutputError',
      conformed: false,
      usage: { promptTokens: 31, completionTokens: 7 },
    });
  });

  it('an answer cut off at the token limit: a warning', async () => {
    const p = await probeGenerator(endpoint('cut'), { timeoutMs: 5_000 });
    expect(p).toMatchObject({ status: 'warn', reason: 'cut-off', conformed: false });
  });

  it('a refused key: a failure (auth), the key not shown though the server echoed it', async () => {
    const p = await probeGenerator(endpoint('auth', KEY.replace('0123', 'wrong')), { timeoutMs: 5_000 });
    expect(p).toMatchObject({
      status: 'fail',
      reason: 'auth',
      error: 'GeneratorRequestError',
      conformed: null,
    });
    expect(p.detail).toContain('refused the API key');
    expect(JSON.stringify(p)).not.toContain(KEY.replace('0123', 'wrong'));
  });

  it('a busy server (429): a warning', async () => {
    const p = await probeGenerator(endpoint('busy'), { model: MODEL, timeoutMs: 5_000 });
    expect(p).toMatchObject({ status: 'warn', reason: 'busy', error: 'GeneratorUnavailableError' });
  });

  it('a hang past the time limit: a failure (timed-out), within the limit', async () => {
    const t0 = Date.now();
    const p = await probeGenerator(endpoint('hang'), { model: MODEL, timeoutMs: 400 });
    expect(Date.now() - t0).toBeLessThan(3_000);
    expect(p).toMatchObject({ status: 'fail', reason: 'timed-out', conformed: null });
    expect(p.detail).toContain('no answer within 400 ms');
  });

  it('a hang while listing models is bounded too', async () => {
    const t0 = Date.now();
    const p = await probeGenerator(endpoint('hang-all'), { timeoutMs: 400 });
    expect(Date.now() - t0).toBeLessThan(3_000);
    expect(p).toMatchObject({ status: 'fail', reason: 'timed-out', endpoint: { model: null } });
  });

  it('a closed port: a failure (unreachable); a warning when nothing was configured', async () => {
    const port = await closedPort();
    const ep = { name: 'default', baseUrl: `http://127.0.0.1:${port}/v1`, headers: {} };
    const p = await probeGenerator(ep, { timeoutMs: 5_000 });
    expect(p).toMatchObject({ status: 'fail', reason: 'unreachable', error: 'GeneratorUnavailableError' });
    expect(p.detail).toMatch(/cannot be reached: connection failed \(ECONNREFUSED\) \(listing its models\)$/);
    const q = await probeGenerator(ep, { timeoutMs: 5_000, configured: false });
    expect(q).toMatchObject({ status: 'warn', reason: 'unreachable' });
    expect(q.detail).toMatch(/^no generator configured/);
  });

  it('the stand-in generator (tests, the demo) answers it as vLLM would', async () => {
    const standin = await startStandin({ port: 0 });
    try {
      const p = await probeGenerator(
        { name: 'default', baseUrl: standin.url, headers: {} },
        { timeoutMs: 5_000 },
      );
      expect(p).toMatchObject({ status: 'ok', conformed: true, endpoint: { model: STANDIN_MODEL } });
      expect(standin.stats.byStage).toEqual({ doctor: 1 });
    } finally {
      await standin.close();
    }
  });

  it('shows a base URL without credentials or query', () => {
    expect(shownBaseUrl('https://u:pw@vllm.internal:8000/v1?key=x#f')).toBe('https://vllm.internal:8000/v1');
  });
});

describe("doctor's generator checks", () => {
  it('never print the API key or header values, in JSON or in words', async () => {
    const env = {
      RODS_GENERATOR_BASE_URL: `${base}/auth/v1`,
      RODS_GENERATOR_API_KEY: 'sk-wrong-but-secret-987',
      RODS_GENERATOR_HEADERS: JSON.stringify({ 'x-tenant-token': 'tenant-secret-555' }),
    };
    const checks = await checkGenerators({ timeoutMs: 5_000 }, env);
    expect(checks).toHaveLength(1);
    expect(checks[0]).toMatchObject({ service: 'generator', ok: false, status: 'fail' });
    const out = JSON.stringify(checks) + checks.map(renderCheck).join('\n');
    expect(out).toContain('FAIL generator');
    for (const secret of ['sk-wrong-but-secret-987', 'tenant-secret-555']) expect(out).not.toContain(secret);
  });

  it('probe every endpoint of the file, each named; a bad endpoints file is a failure', async () => {
    const ok = await checkGenerators({ timeoutMs: 5_000 }, { RODS_GENERATOR_BASE_URL: `${base}/ok/v1` });
    expect(ok).toMatchObject([{ ok: true, status: 'ok', generator: { endpoint: { name: 'default' } } }]);
    expect(renderCheck(ok[0]!)).toMatch(/^ok {3}generator +\d+ ms {2}endpoint "default" \(http:\/\/127/);
    const bad = await checkGenerators({}, { RODS_GENERATOR_ENDPOINTS_FILE: '/nonexistent/endpoints.json' });
    expect(bad).toMatchObject([{ ok: false, status: 'fail' }]);
  });
});
