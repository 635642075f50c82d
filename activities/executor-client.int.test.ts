import { type ChildProcess, spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import net from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SEED_CATEGORIES, type TaskRecord } from '../domain/task.js';
import { executorPython } from '../infra/stack/executor.js';
import { paths } from '../infra/stack/paths.js';
import { freePort } from '../platform/util/free-port.js';
import { waitUntil } from '../test/support/wait.js';
import { type ExecuteRequest, ExecutorClient, ExecutorError, executorUrl } from './executor-client.js';

// The environment executor of the local stack (started by the global setup), through its client.
const client = new ExecutorClient();

const requestOf = (task: TaskRecord): ExecuteRequest => ({
  involved_classes: task.involved_classes,
  initial_config: task.initial_config,
  ground_truth: task.ground_truth,
  long_context: task.category === 'long_context',
});

const fsConfig = {
  GorillaFileSystem: {
    root: {
      alex: {
        type: 'directory',
        contents: { docs: { type: 'directory', contents: { 'a.txt': { type: 'file', content: 'hello' } } } },
      },
    },
  },
};
const fsRequest = (...turns: string[][]): ExecuteRequest => ({
  involved_classes: ['GorillaFileSystem'],
  initial_config: fsConfig,
  ground_truth: turns,
});

describe('environment executor HTTP API', () => {
  let base: TaskRecord[];

  beforeAll(async () => {
    base = await client.seeds('base', 5);
  });

  it('reports its bfcl-eval version, classes and seed counts', async () => {
    const h = await client.health();
    expect(h.ok).toBe(true);
    expect(h.bfcl_eval_version).toMatch(/^\d{4}\.\d+\.\d+/);
    expect(h.classes).toEqual(
      expect.arrayContaining([
        'GorillaFileSystem',
        'MathAPI',
        'MessageAPI',
        'TwitterAPI',
        'TicketAPI',
        'TradingBot',
        'TravelAPI',
        'VehicleControlAPI',
      ]),
    );
    for (const c of SEED_CATEGORIES) expect(h.categories[c]).toBeGreaterThanOrEqual(100);
  });

  it('serves 100 seed tasks per category by default, as BFCL task records', async () => {
    for (const category of SEED_CATEGORIES) {
      const seeds = await client.seeds(category);
      expect(seeds).toHaveLength(100);
      expect(new Set(seeds.map((s) => s.id)).size).toBe(100);
      expect(seeds[0]!.id).toBe(`multi_turn_${category}_0`);
      for (const s of seeds) {
        expect(s.category).toBe(category);
        expect(s.question.length).toBe(s.ground_truth.length);
        expect(s.involved_classes.length).toBeGreaterThan(0);
        expect(s.ground_truth.flat().length).toBeGreaterThan(0);
      }
      if (category === 'miss_func') expect(seeds.every((s) => s.missed_function !== undefined)).toBe(true);
      else expect(seeds.some((s) => s.missed_function !== undefined)).toBe(false);
    }
    const page = await client.seeds('miss_param', 3, 10);
    expect(page.map((s) => s.id)).toEqual([
      'multi_turn_miss_param_10',
      'multi_turn_miss_param_11',
      'multi_turn_miss_param_12',
    ]);
  });

  it('refuses an unknown category with a clear error', async () => {
    const err = await client.seeds('nope' as 'base').catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ExecutorError);
    expect((err as ExecutorError).status).toBe(400);
    expect((err as ExecutorError).message).toContain(
      'category must be one of base, miss_func, miss_param, long_context',
    );
  });

  it("executes a seed's ground truth: every call ok, the state of every class after each turn", async () => {
    const task = base[0]!;
    const r = await client.execute(requestOf(task));
    expect(r.ok).toBe(true);
    expect(r.failure).toBeNull();
    expect(r.turns.map((t) => t.results.map((c) => c.call))).toEqual(task.ground_truth);
    for (const t of r.turns) {
      expect(Object.keys(t.state).sort()).toEqual([...task.involved_classes].sort());
      for (const c of t.results) {
        expect(c.ok).toBe(true);
        expect(c.function).toMatch(/^[A-Za-z]+\.[a-z_]+$/);
      }
    }
    // Fresh instances per request: the same request gives the same results and states.
    const again = await client.execute(requestOf(task));
    expect(again).toEqual(r);
  });

  it('takes a whole task record as the request (long_context follows its category)', async () => {
    const [task] = await client.seeds('long_context', 1, 7);
    const fromRecord = await client.execute(task!);
    expect(fromRecord.ok).toBe(true);
    expect(fromRecord).toEqual(await client.execute(requestOf(task!)));
  });

  it('keeps no state between requests', async () => {
    const first = await client.execute(fsRequest(["cd(folder='docs')", "touch(file_name='b.txt')", 'ls()']));
    expect(first.turns[0]!.results[2]!.result).toEqual({ current_directory_content: ['a.txt', 'b.txt'] });
    const second = await client.execute(fsRequest(["cd(folder='docs')", 'ls()']));
    expect(second.turns[0]!.results[1]!.result).toEqual({ current_directory_content: ['a.txt'] });
  });

  it('carries state from turn to turn within a request', async () => {
    const r = await client.execute(
      fsRequest(["cd(folder='docs')", "mkdir(dir_name='x')"], ["rm(file_name='a.txt')"]),
    );
    expect(r.ok).toBe(true);
    const docs = (t: number) =>
      (r.turns[t]!.state.GorillaFileSystem!.root as { contents: { docs: { contents: object } } }).contents
        .docs.contents;
    expect(Object.keys(docs(0)).sort()).toEqual(['a.txt', 'x']);
    expect(Object.keys(docs(1))).toEqual(['x']);
  });

  it('reports a call string that does not parse as a parse failure, and never runs it', async () => {
    const r = await client.execute(
      fsRequest(["cd(folder='docs'", "__import__('os').system('touch /tmp/rods-executor-pwned')", 'pwd()']),
    );
    expect(r.ok).toBe(false);
    expect(r.failure).toMatchObject({ turn: 0, index: 0, call: "cd(folder='docs'", kind: 'parse' });
    expect(r.failure!.reason).toContain('not valid Python call syntax');
    const [broken, hostile, pwd] = r.turns[0]!.results;
    expect(broken).toMatchObject({ ok: false, kind: 'parse' });
    expect(hostile).toMatchObject({ ok: false, kind: 'parse' });
    expect(hostile!.error).toContain('method calls on objects');
    expect(pwd).toMatchObject({ ok: true, result: { current_working_directory: '/alex' } });
  });

  it('reports a function that is not a method of the involved classes as unknown-function', async () => {
    const r = await client.execute(fsRequest(["send_message(receiver_id='u1', message='hi')"]));
    expect(r.ok).toBe(false);
    expect(r.failure).toMatchObject({
      kind: 'unknown-function',
      call: "send_message(receiver_id='u1', message='hi')",
    });
    expect(r.failure!.reason).toContain("unknown function 'send_message'");
  });

  it("reports an error the environment returns as an execution failure, with the environment's message", async () => {
    const r = await client.execute(fsRequest(['pwd()'], ["cd(folder='missing')"]));
    expect(r.ok).toBe(false);
    expect(r.failure).toEqual({
      turn: 1,
      index: 0,
      call: "cd(folder='missing')",
      reason: "cd returned an error: cd: 'missing': No such file or directory",
      kind: 'execution',
    });
    expect(r.turns[1]!.results[0]!.result).toEqual({ error: "cd: 'missing': No such file or directory" });
  });

  it('stops a run at its time limit and says which call it was in', async () => {
    const r = await client.execute({
      involved_classes: ['MathAPI'],
      initial_config: {},
      ground_truth: [['add(a=1, b=2)'], ['power(base=7, exponent=1000000000000)']],
      timeout_ms: 500,
    });
    expect(r.ok).toBe(false);
    expect(r.failure).toMatchObject({ turn: 1, index: 0, kind: 'execution' });
    expect(r.failure!.reason).toContain('time limit of 500 ms exceeded');
    expect(r.turns).toHaveLength(1);
    expect(r.stopped?.call).toBe('power(base=7, exponent=1000000000000)');
  });

  it('refuses an unknown class with 400', async () => {
    const err = await client
      .execute({ involved_classes: ['Shell'], initial_config: {}, ground_truth: [['ls()']] })
      .catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ExecutorError);
    expect((err as ExecutorError).status).toBe(400);
    expect((err as ExecutorError).message).toContain("unknown class(es) 'Shell'");
  });

  it('refuses a body over the size limit with 413 and a JSON error', async () => {
    const huge = `echo(content='${'x'.repeat(3 * 1024 * 1024)}', file_name='f')`;
    const err = await client.execute(fsRequest([huge])).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ExecutorError);
    expect((err as ExecutorError).status).toBe(413);
    expect((err as ExecutorError).message).toMatch(
      /request body of \d+ bytes exceeds the limit of 2097152 bytes/,
    );
    // The service is still fine afterwards.
    expect((await client.health()).ok).toBe(true);
  });

  it('refuses malformed JSON with 400 naming the problem', async () => {
    const err = await client.executeRaw('{"involved_classes": ["MathAPI"], ').catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ExecutorError);
    expect((err as ExecutorError).status).toBe(400);
    expect((err as ExecutorError).message).toContain(
      'malformed JSON: Expecting property name enclosed in double quotes',
    );
    const notObject = await client.executeRaw('[1, 2]').catch((e: unknown) => e);
    expect((notObject as ExecutorError).status).toBe(400);
    expect((notObject as ExecutorError).message).toContain('must be a JSON object');
  });

  it('answers 404 for an unknown endpoint', async () => {
    const res = await fetch(`${client.url}/nope`);
    expect(res.status).toBe(404);
    expect(((await res.json()) as { error: string }).error).toContain('no such endpoint /nope');
  });
});

describe('every shipped seed executes its own ground truth', () => {
  it.each(SEED_CATEGORIES)('%s', async (category) => {
    const total = (await client.health()).categories[category]!;
    const seeds = await client.seeds(category, total);
    expect(seeds).toHaveLength(total);
    const failed: string[] = [];
    // Two at a time: the executor runs each request in a process of its own.
    for (let i = 0; i < seeds.length; i += 2) {
      const batch = seeds.slice(i, i + 2);
      const results = await Promise.all(batch.map((s) => client.execute(requestOf(s))));
      results.forEach((r, j) => {
        if (!r.ok) failed.push(`${batch[j]!.id}: ${JSON.stringify(r.failure)}`);
      });
    }
    console.log(
      `[executor] ${category}: ${seeds.length - failed.length}/${seeds.length} seeds execute cleanly`,
    );
    expect(failed).toEqual([]);
  });
});

describe('executor limits, through the client (an executor of its own: one slot, 300 ms slot wait)', () => {
  let proc: ChildProcess;
  let own: ExecutorClient;
  const exited = () => proc.exitCode !== null || proc.signalCode !== null;

  beforeAll(async () => {
    const port = await freePort();
    proc = spawn(executorPython(), ['-m', 'executor', '--host', '127.0.0.1', '--port', String(port)], {
      cwd: paths.root,
      env: {
        ...process.env,
        PYTHONDONTWRITEBYTECODE: '1',
        RODS_EXECUTOR_CONCURRENCY: '1',
        RODS_EXECUTOR_SLOT_WAIT_MS: '300',
      },
      stdio: 'ignore',
    });
    own = new ExecutorClient({ url: `http://127.0.0.1:${port}` });
    await waitUntil(
      () =>
        exited() ||
        own.health({ timeoutMs: 1000 }).then(
          () => true,
          () => false,
        ),
      {
        what: 'the executor answers /health',
      },
    );
    expect(exited()).toBe(false);
  });

  afterAll(async () => {
    if (!proc || exited()) return;
    proc.kill('SIGTERM');
    await waitUntil(exited, { what: 'the executor exited' });
  });

  const bigFs = (turns: string[][]): ExecuteRequest => ({
    involved_classes: ['GorillaFileSystem'],
    initial_config: {
      GorillaFileSystem: {
        root: {
          alex: {
            type: 'directory',
            contents: { 'big.txt': { type: 'file', content: 'x'.repeat(1_750_000) } },
          },
        },
      },
    },
    ground_truth: turns,
  });

  it('refuses ~1.75 MB of state kept over 400 turns with a final error naming the limit; memory stays bounded', async () => {
    const err = await own
      .execute(bigFs(Array.from({ length: 400 }, () => ['pwd()'])))
      .catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ExecutorError);
    expect(err).toMatchObject({ status: 422, limit: 'RODS_EXECUTOR_MAX_RESULT_BYTES', retryable: false });
    expect((err as ExecutorError).message).toContain(
      'larger than 16777216 bytes as JSON (RODS_EXECUTOR_MAX_RESULT_BYTES)',
    );
    // peak resident memory of the supervisor (the run itself is another process)
    const hwmKb = Number(/VmHWM:\s+(\d+) kB/.exec(readFileSync(`/proc/${proc.pid}/status`, 'utf8'))?.[1]);
    expect(hwmKb).toBeGreaterThan(0);
    expect(hwmKb).toBeLessThan(256 * 1024);
  });

  it('executes 400 nested directories', async () => {
    const calls = Array.from({ length: 400 }, (_, i) => [
      `mkdir(dir_name='d${i}')`,
      `cd(folder='d${i}')`,
    ]).flat();
    const r = await own.execute(fsRequest(calls, ['pwd()']));
    expect(r.ok).toBe(true);
    expect(
      (r.turns[1]!.results[0]!.result as { current_working_directory: string }).current_working_directory,
    ).toBe(`/alex/${Array.from({ length: 400 }, (_, i) => `d${i}`).join('/')}`);
  });

  it('answers 503 with Retry-After when every slot stays busy; the client may retry', async () => {
    const holding = own
      .execute({
        involved_classes: ['MathAPI'],
        initial_config: {},
        ground_truth: [['power(base=7, exponent=1000000000000)']],
        timeout_ms: 3000,
      })
      .catch((e: unknown) => e);
    await waitUntil(async () => ((await own.health()) as { load?: { busy?: number } }).load?.busy === 1, {
      what: 'the one slot is busy',
      timeoutMs: 10_000,
    });
    const err = await own.execute(fsRequest(['pwd()'])).catch((e: unknown) => e);
    expect(err).toMatchObject({ status: 503, limit: 'RODS_EXECUTOR_SLOT_WAIT_MS', retryable: true });
    expect((err as ExecutorError).retryAfterMs).toBeGreaterThanOrEqual(1000);
    expect((err as ExecutorError).message).toContain('all 1 execution slots stayed busy for 300 ms');
    expect(await holding).toMatchObject({
      ok: false,
      stopped: { call: 'power(base=7, exponent=1000000000000)' },
    });
  });
});

describe('executor client without an executor', () => {
  it('says the executor is down, where it looked and how to start it', async () => {
    const port = await new Promise<number>((resolve) => {
      const s = net.createServer().listen(0, '127.0.0.1', () => {
        const p = (s.address() as net.AddressInfo).port;
        s.close(() => resolve(p));
      });
    });
    const down = new ExecutorClient({ url: `http://127.0.0.1:${port}` });
    const err = await down.health().catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ExecutorError);
    expect((err as ExecutorError).code).toBe('down');
    expect((err as ExecutorError).message).toContain(
      `the environment executor at http://127.0.0.1:${port} is not reachable`,
    );
    expect((err as ExecutorError).message).toContain('npm run stack:up');
  });

  it('reads its endpoint from RODS_EXECUTOR_URL', () => {
    expect(executorUrl({})).toBe('http://127.0.0.1:7300');
    expect(executorUrl({ RODS_EXECUTOR_URL: 'http://exec.internal:8080/' })).toBe(
      'http://exec.internal:8080',
    );
    expect(() => executorUrl({ RODS_EXECUTOR_URL: 'ftp://x' })).toThrow(/must be http/);
    expect(() => executorUrl({ RODS_EXECUTOR_URL: 'not a url' })).toThrow(/not a URL/);
  });
});
