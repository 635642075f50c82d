// A private Temporal dev server (the stack's own binary, in memory, on free ports) that suggests
// continue-as-new after a given number of history events, for tests and benchmarks that need
// several runs of a workflow without thousands of steps. While it runs, TEMPORAL_ADDRESS points
// every Temporal connection of the process (worker, client) at it; stop() restores it.
import { spawn } from 'node:child_process';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { probeTemporal } from '../../infra/stack/temporal.js';
import { freePort } from '../../platform/util/free-port.js';
import { waitUntil } from '../../test/support/wait.js';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');

export interface PrivateTemporal {
  address: string;
  stop(): Promise<void>;
}

export async function startPrivateTemporal(opts: {
  suggestContinueAsNewAt: number;
}): Promise<PrivateTemporal> {
  const port = await freePort();
  const server = spawn(
    path.join(ROOT, '.stack/bin/temporal'),
    [
      'server',
      'start-dev',
      '--headless',
      '--ip',
      '127.0.0.1',
      '--port',
      String(port),
      '--http-port',
      String(await freePort()),
      '--metrics-port',
      String(await freePort()),
      '--log-level',
      'error',
      '--dynamic-config-value',
      `limit.historyCount.suggestContinueAsNew=${opts.suggestContinueAsNewAt}`,
      '--dynamic-config-value',
      'frontend.enableUpdateWorkflowExecution=true',
    ],
    { stdio: 'ignore' },
  );
  const exited = new Promise<void>((r) => server.once('exit', () => r()));
  const saved = process.env.TEMPORAL_ADDRESS;
  const address = `127.0.0.1:${port}`;
  process.env.TEMPORAL_ADDRESS = address;
  const stop = async () => {
    if (server.exitCode === null && server.signalCode === null) {
      server.kill('SIGTERM');
      await exited;
    }
    if (saved === undefined) delete process.env.TEMPORAL_ADDRESS;
    else process.env.TEMPORAL_ADDRESS = saved;
  };
  try {
    await waitUntil(async () => (await probeTemporal(address, 'default')).answering, {
      what: `the private Temporal dev server at ${address} to answer`,
      timeoutMs: 60_000,
      intervalMs: 200,
    });
  } catch (e) {
    await stop();
    throw e;
  }
  return { address, stop };
}
