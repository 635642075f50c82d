// The Temporal Web UI as the stack starts it: a private in-memory dev server with the stack's
// own arguments (devServerArgs) on free ports, never the shared server, whose UI must answer with
// its page and show the server's namespace through its API.
import { type ChildProcess, spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { temporalUiUrl } from '../../platform/temporal/ui.js';
import { freePort } from '../../platform/util/free-port.js';
import { waitUntil } from '../../test/support/wait.js';
import { paths } from './paths.js';
import { devServerArgs, probeTemporal, probeTemporalUi, temporalService } from './temporal.js';

let server: ChildProcess | undefined;
let address = '';
let env: NodeJS.ProcessEnv = {};

beforeAll(async () => {
  const port = await freePort();
  env = {
    RODS_TEMPORAL_UI_PORT: String(await freePort()),
    RODS_TEMPORAL_HTTP_PORT: String(await freePort()),
    RODS_TEMPORAL_METRICS_PORT: String(await freePort()),
  };
  const binary = path.join(paths.bin, 'temporal');
  if (!existsSync(binary)) throw new Error(`${binary} is missing: npm run stack:up builds it`);
  server = spawn(
    binary,
    devServerArgs({ host: '127.0.0.1', port, namespace: 'default', logLevel: 'error', env }),
    { stdio: 'ignore' },
  );
  address = `127.0.0.1:${port}`;
  await waitUntil(async () => (await probeTemporal(address, 'default')).answering, {
    what: `the private Temporal dev server at ${address} to answer`,
    timeoutMs: 90_000,
    intervalMs: 250,
  });
}, 120_000);

afterAll(() => {
  server?.kill('SIGTERM');
});

describe('the Temporal Web UI of the stack', () => {
  it('answers on loopback at the configured port with its page and the server namespace', async () => {
    const url = temporalUiUrl(address, env);
    expect(url).toBe(`http://127.0.0.1:${env.RODS_TEMPORAL_UI_PORT}`);
    const probe = await waitUntil(
      async () => {
        const p = await probeTemporalUi(url!);
        return p.answering ? p : undefined;
      },
      { what: `the Web UI at ${url}`, timeoutMs: 60_000, intervalMs: 250 },
    );
    expect(probe.detail).toBe(`Web UI ${url}`);
    const page = await (await fetch(url!)).text();
    // The UI's single-page app (its scripts under /_app/).
    expect(page).toMatch(/<html/i);
    expect(page).toContain('/_app/');
    // The UI's server side talks to the frontend: it lists the dev server's namespace.
    const ns = (await (await fetch(`${url}/api/v1/namespaces`)).json()) as {
      namespaces?: { namespaceInfo?: { name?: string } }[];
    };
    expect(ns.namespaces?.map((n) => n.namespaceInfo?.name)).toContain('default');
    // `npm run stack:status` shows where the UI is (this file's process points at the private server).
    Object.assign(process.env, { TEMPORAL_ADDRESS: address, ...env });
    const { status } = await import('./cli.js');
    const [row] = await status([temporalService()]);
    expect(row?.answering).toBe(true);
    expect(row?.detail).toContain(`Web UI ${url}`);
    // The HTTP API is elsewhere and is not taken for the UI.
    const api = await probeTemporalUi(`http://127.0.0.1:${env.RODS_TEMPORAL_HTTP_PORT}`);
    expect(api.answering).toBe(false);
  });
});
