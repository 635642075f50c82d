import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ExecutorClient, ExecutorError } from './executor-client.js';

// How the client classifies the executor's answers: a refusal of the request itself (4xx) is
// final, a busy or failing executor (503, 429, 5xx, down) is worth retrying, and the executor's
// message, the setting that refused and Retry-After reach the caller. A local HTTP server plays
// the executor.
let server: http.Server;
let url: string;
const answers: Record<string, { status: number; body: string; headers?: Record<string, string> }> = {
  '/limit': {
    status: 422,
    body: JSON.stringify({
      error:
        'the state of GorillaFileSystem after turn 0 nests deeper than 1000 levels (RODS_EXECUTOR_MAX_DEPTH)',
      limit: 'RODS_EXECUTOR_MAX_DEPTH',
    }),
  },
  '/too-big': {
    status: 413,
    body: JSON.stringify({
      error: 'request body of 3 bytes exceeds ...',
      limit: 'RODS_EXECUTOR_MAX_BODY_BYTES',
    }),
  },
  '/bad': { status: 400, body: JSON.stringify({ error: "unknown class(es) 'Shell'" }) },
  '/busy': {
    status: 503,
    body: JSON.stringify({
      error: 'all 2 execution slots stayed busy for 15000 ms (RODS_EXECUTOR_SLOT_WAIT_MS); try again later',
      limit: 'RODS_EXECUTOR_SLOT_WAIT_MS',
    }),
    headers: { 'retry-after': '7' },
  },
  '/slow-down': { status: 429, body: '{"error":"slow down"}' },
  '/bug': { status: 500, body: '{"error":"executor failure: KeyError"}' },
  '/proxy': { status: 502, body: '<html>bad gateway</html>', headers: { 'retry-after': '2' } },
};

beforeAll(async () => {
  server = http.createServer((req, res) => {
    const a = answers[(req.url ?? '').replace(/\/health$/, '')] ?? { status: 404, body: '{"error":"no"}' };
    req.resume();
    res.writeHead(a.status, { 'content-type': 'application/json', ...a.headers });
    res.end(a.body);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});

afterAll(async () => {
  await new Promise((resolve) => server.close(resolve));
});

async function errorAt(path: string): Promise<ExecutorError> {
  const client = new ExecutorClient({ url: `${url}${path}` });
  const err = await client.health().catch((e: unknown) => e);
  expect(err).toBeInstanceOf(ExecutorError);
  return err as ExecutorError;
}

describe('executor client errors', () => {
  it('a limit the request passed is final and names the setting', async () => {
    const e = await errorAt('/limit');
    expect(e).toMatchObject({
      code: 'http',
      status: 422,
      limit: 'RODS_EXECUTOR_MAX_DEPTH',
      retryable: false,
    });
    expect(e.message).toContain(
      'HTTP 422: the state of GorillaFileSystem after turn 0 nests deeper than 1000 levels',
    );
    expect(e.retryAfterMs).toBeUndefined();
    expect(await errorAt('/too-big')).toMatchObject({
      status: 413,
      limit: 'RODS_EXECUTOR_MAX_BODY_BYTES',
      retryable: false,
    });
    expect(await errorAt('/bad')).toMatchObject({ status: 400, limit: undefined, retryable: false });
  });

  it('a busy executor is retried after the time it asks for', async () => {
    const e = await errorAt('/busy');
    expect(e).toMatchObject({
      status: 503,
      limit: 'RODS_EXECUTOR_SLOT_WAIT_MS',
      retryable: true,
      retryAfterMs: 7000,
    });
    expect(e.message).toContain('all 2 execution slots stayed busy for 15000 ms');
    expect(await errorAt('/slow-down')).toMatchObject({ status: 429, retryable: true });
  });

  it('a failing, unreachable or misconfigured executor', async () => {
    expect(await errorAt('/bug')).toMatchObject({ status: 500, retryable: true });
    expect(await errorAt('/proxy')).toMatchObject({ status: 502, retryable: true, retryAfterMs: 2000 });
    const down = new ExecutorError('not reachable', 'down');
    expect(down.retryable).toBe(true);
    expect(new ExecutorError('no answer', 'timeout').retryable).toBe(true);
    expect(new ExecutorError('bad url', 'config').retryable).toBe(false);
  });
});

describe('the bearer token (RODS_EXECUTOR_TOKEN_FILE)', () => {
  it("sends the file's current token with every request and refuses an unreadable file by name", async () => {
    const { mkdtempSync, writeFileSync, rmSync } = await import('node:fs');
    const { tmpdir } = await import('node:os');
    const path = await import('node:path');
    const dir = mkdtempSync(path.join(tmpdir(), 'rods-exec-token-'));
    const seen: (string | undefined)[] = [];
    const echo = http.createServer((req, res) => {
      seen.push(req.headers.authorization);
      req.resume();
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(
        JSON.stringify({
          ok: true,
          bfcl_eval_version: 'x',
          classes: [],
          categories: {},
          python: '3',
          pid: 1,
        }),
      );
    });
    await new Promise<void>((resolve) => echo.listen(0, '127.0.0.1', resolve));
    try {
      const at = `http://127.0.0.1:${(echo.address() as AddressInfo).port}`;
      const file = path.join(dir, 'token');
      writeFileSync(file, 'tok-1\n');
      const client = new ExecutorClient({ url: at, tokenFile: file });
      await client.health();
      writeFileSync(file, 'tok-2\n'); // rotated: the next request carries the new one
      await client.health();
      await new ExecutorClient({ url: at }).health(); // no file: no header
      expect(seen).toEqual(['Bearer tok-1', 'Bearer tok-2', undefined]);

      const missing = path.join(dir, 'absent');
      expect(() => new ExecutorClient({ url: at, tokenFile: missing })).toThrow(
        /RODS_EXECUTOR_TOKEN_FILE: cannot read .*absent \(ENOENT\)/,
      );
      writeFileSync(file, '\n');
      const e = await client.health().catch((x: unknown) => x);
      expect(e).toMatchObject({ code: 'config' });
      expect((e as Error).message).toMatch(/is empty/);
    } finally {
      await new Promise((resolve) => echo.close(resolve));
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
