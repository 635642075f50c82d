// Long-running processes started while a backing service is down: they stay up, say what they
// wait for, and (the gateway) answer not-ready, instead of exiting. Endpoints point at a port
// nothing listens on, so the shared stack is not touched.
import { type ChildProcess, spawn } from 'node:child_process';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { freePort } from '../../../platform/util/free-port.js';
import { ROOT } from '../../../test/support/sources.js';
import { waitUntil } from '../../../test/support/wait.js';

const children: ChildProcess[] = [];

function start(args: string[], env: Record<string, string>): { child: ChildProcess; output: () => string } {
  let out = '';
  const child = spawn(process.execPath, [path.join(ROOT, 'bin/rods.mjs'), ...args], {
    cwd: ROOT,
    env: { ...process.env, RODS_LOG_LEVEL: 'warn', RODS_GATEWAY_TOKENS: 'startup-token', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  child.stdout?.on('data', (d) => {
    out += d;
  });
  child.stderr?.on('data', (d) => {
    out += d;
  });
  children.push(child);
  return { child, output: () => out };
}

afterEach(() => {
  for (const c of children.splice(0)) if (c.exitCode === null) c.kill('SIGKILL');
});

describe('starting during an outage', () => {
  it('the gateway with Temporal down listens, answers /readyz 503 temporal-unavailable, and stays up', async () => {
    const port = await freePort();
    const { child, output } = start(['gateway', '--port', String(port)], {
      TEMPORAL_ADDRESS: `127.0.0.1:${await freePort()}`,
    });
    const r = await waitUntil(
      async () => {
        if (child.exitCode !== null) throw new Error(`the gateway exited (${child.exitCode}): ${output()}`);
        return fetch(`http://127.0.0.1:${port}/readyz`).catch(() => undefined);
      },
      { what: 'the gateway to answer /readyz', timeoutMs: 90_000, intervalMs: 250 },
    );
    expect(r.status).toBe(503);
    expect(((await r.json()) as { type: string }).type).toMatch(/temporal-unavailable/);
    expect((await fetch(`http://127.0.0.1:${port}/healthz`)).status).toBe(200);
    expect(child.exitCode).toBeNull();
  });

  it('the worker with Temporal down says it waits for Temporal and does not exit', async () => {
    const { child, output } = start(['worker', '--task-queue', 'startup-outage'], {
      TEMPORAL_ADDRESS: `127.0.0.1:${await freePort()}`,
    });
    await waitUntil(
      () => {
        if (child.exitCode !== null) throw new Error(`the worker exited (${child.exitCode}): ${output()}`);
        return /Temporal unreachable .*waiting for it/.test(output());
      },
      { what: 'the worker to say it waits for Temporal', timeoutMs: 90_000, intervalMs: 250 },
    );
    // A few of its connection attempts later, it still runs.
    await new Promise((r) => setTimeout(r, 3000));
    expect(child.exitCode).toBeNull();
  });

  it('the aggregator with PostgreSQL down says it waits for PostgreSQL and does not exit', async () => {
    const { child, output } = start(['aggregator'], {
      DATABASE_URL: `postgres://rods:nobody-listens@127.0.0.1:${await freePort()}/rods`,
    });
    await waitUntil(
      () => {
        if (child.exitCode !== null)
          throw new Error(`the aggregator exited (${child.exitCode}): ${output()}`);
        return /PostgreSQL unreachable .*waiting for it/.test(output());
      },
      { what: 'the aggregator to say it waits for PostgreSQL', timeoutMs: 90_000, intervalMs: 250 },
    );
    await new Promise((r) => setTimeout(r, 3000));
    expect(child.exitCode).toBeNull();
  });

  it('the aggregator with Kafka down says it cannot start yet and retries, without exiting', async () => {
    const { child, output } = start(['aggregator', '--group', 'startup-outage'], {
      KAFKA_BROKERS: `127.0.0.1:${await freePort()}`,
    });
    await waitUntil(
      () => {
        if (child.exitCode !== null)
          throw new Error(`the aggregator exited (${child.exitCode}): ${output()}`);
        return /aggregator: cannot start .*retrying/.test(output());
      },
      { what: 'the aggregator to say it retries its start', timeoutMs: 150_000, intervalMs: 250 },
    );
    await new Promise((r) => setTimeout(r, 3000));
    expect(child.exitCode).toBeNull();
  }, 180_000);
});
