// Temporal dev server from the `temporal` CLI built from its Go module, persisted in SQLite.
import { existsSync, mkdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { Connection } from '@temporalio/client';
import { isLoopback, loadEndpoints, splitHostPort } from '../../platform/config/endpoints.js';
import { temporalHttpPort, temporalUiPort, temporalUiUrl } from '../../platform/temporal/ui.js';
import { paths } from './paths.js';
import { ourPid, run, StackError, spawnDetached, stopOurs, tail, waitFor, which } from './proc.js';
import type { Probe, Service } from './service.js';

const NAME = 'temporal';
export const TEMPORAL_CLI_VERSION = '1.5.1';

/** Dynamic config the dev server starts with; extra `key=value` pairs via RODS_TEMPORAL_DYNAMIC_CONFIG (comma-separated). */
function dynamicConfig(env: NodeJS.ProcessEnv = process.env): string[] {
  const base = [
    'frontend.enableUpdateWorkflowExecution=true',
    'frontend.enableUpdateWorkflowExecutionAsyncAccepted=true',
  ];
  const extra = (env.RODS_TEMPORAL_DYNAMIC_CONFIG ?? '')
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean);
  return [...base, ...extra].flatMap((kv) => ['--dynamic-config-value', kv]);
}

export async function probeTemporal(address: string, namespace: string): Promise<Probe> {
  let connection: Connection | undefined;
  try {
    connection = await Connection.connect({ address, connectTimeout: 2000 });
    const ns = await connection.workflowService.describeNamespace({ namespace });
    return { answering: true, detail: `namespace ${ns.namespaceInfo?.name ?? namespace} registered` };
  } catch (e) {
    return { answering: false, detail: (e as Error).message.split('\n')[0] ?? 'error' };
  } finally {
    await connection?.close().catch(() => {});
  }
}

/**
 * The `temporal server start-dev` arguments of the stack's server: the Web UI on loopback at
 * RODS_TEMPORAL_UI_PORT (default the frontend's port + 1000, 8233; 0 or off: headless), the HTTP
 * API at RODS_TEMPORAL_HTTP_PORT (default + 3000), metrics at RODS_TEMPORAL_METRICS_PORT
 * (default + 2000). No dbFile: in memory (tests).
 */
export function devServerArgs(o: {
  host: string;
  port: number;
  namespace: string;
  dbFile?: string;
  logLevel?: string;
  env?: NodeJS.ProcessEnv;
}): string[] {
  const env = o.env ?? process.env;
  const ui = temporalUiPort(o.port, env);
  return [
    'server',
    'start-dev',
    ...(ui === null ? ['--headless'] : ['--ui-ip', o.host, '--ui-port', String(ui)]),
    '--ip',
    o.host,
    '--port',
    String(o.port),
    '--http-port',
    String(temporalHttpPort(o.port, env)),
    '--metrics-port',
    String(Number(env.RODS_TEMPORAL_METRICS_PORT || o.port + 2000)),
    '--namespace',
    o.namespace,
    ...(o.dbFile ? ['--db-filename', o.dbFile] : []),
    '--log-level',
    o.logLevel ?? 'warn',
    ...dynamicConfig(env),
  ];
}

/** Whether the Web UI answers at this URL (its HTML page, not the HTTP API's JSON). */
export async function probeTemporalUi(url: string, timeoutMs = 3000): Promise<Probe> {
  try {
    const r = await fetch(url, { signal: AbortSignal.timeout(timeoutMs), redirect: 'follow' });
    const type = r.headers.get('content-type') ?? '';
    if (r.ok && type.includes('text/html')) return { answering: true, detail: `Web UI ${url}` };
    return {
      answering: false,
      detail: `${url} answered ${r.status} ${type || 'without a content type'}, not the Web UI`,
    };
  } catch (e) {
    return { answering: false, detail: `${url}: ${(e as Error).message}` };
  }
}

export function temporalService(): Service {
  const { temporalAddress, temporalNamespace } = loadEndpoints();
  const { host, port } = splitHostPort(temporalAddress);
  const binary = path.join(paths.bin, 'temporal');
  const stamp = path.join(paths.bin, `.temporal-${TEMPORAL_CLI_VERSION}`);
  const dbFile = path.join(paths.data, 'temporal', 'temporal.db');
  const log = paths.log(NAME);
  const marker = `--port ${port} --http-port`;

  const uiUrl = temporalUiUrl(temporalAddress);
  // Up means the frontend answers; the detail says where the Web UI is and whether it answers.
  const probe = async (): Promise<Probe> => {
    const p = await probeTemporal(temporalAddress, temporalNamespace);
    if (!p.answering || uiUrl === null) return p;
    const ui = await probeTemporalUi(uiUrl);
    return {
      answering: true,
      detail: ui.answering
        ? `${p.detail}; ${ui.detail}`
        : `${p.detail}; no Web UI at ${uiUrl} (a server started headless by an older stack gets it at its next start: npm run stack:down && npm run stack:up)`,
    };
  };

  return {
    name: NAME,
    endpoint: `${temporalAddress} (namespace ${temporalNamespace})`,
    managed: isLoopback(host) && process.env.RODS_MANAGE_TEMPORAL !== '0',
    port,
    log,
    async install() {
      // `go install` leaves the version as 0.0.0-DEV, so a stamp file records what was built.
      if (existsSync(binary) && existsSync(stamp)) return;
      if (!(await which('go'))) {
        throw new StackError(
          'the Go toolchain (`go`, 1.25 or newer) is needed once to build the temporal CLI; install it from your distribution (golang) or go.dev',
          NAME,
        );
      }
      console.log(
        `[temporal] building the temporal CLI v${TEMPORAL_CLI_VERSION} with go install (first time only, a few minutes) ...`,
      );
      await run('go', ['install', `github.com/temporalio/cli/cmd/temporal@v${TEMPORAL_CLI_VERSION}`], {
        env: { ...process.env, GOBIN: paths.bin, GOFLAGS: '-trimpath' },
      }).catch((e: Error & { stderr?: string }) => {
        throw new StackError(
          `go install of the temporal CLI failed (is the Go module proxy reachable?):\n${(e.stderr ?? e.message).slice(-4000)}`,
          NAME,
        );
      });
      writeFileSync(stamp, `${new Date().toISOString()}\n`);
    },
    pid: () => ourPid(NAME, marker, dbFile),
    async start() {
      mkdirSync(path.dirname(dbFile), { recursive: true });
      const pid = spawnDetached(
        NAME,
        binary,
        devServerArgs({ host, port, namespace: temporalNamespace, dbFile, logLevel: 'warn' }),
      );
      // The first start creates the SQLite schema, which takes a minute or more on a busy 2-core machine.
      await waitFor(
        'temporal',
        async () => (await probe()).answering,
        300_000,
        () => ourPid(NAME, marker, dbFile) === pid,
      ).catch((e) => {
        throw new StackError(`${(e as Error).message}\n--- tail of ${log} ---\n${tail(log)}`, NAME);
      });
    },
    probe,
    stop: () => stopOurs(NAME, ourPid(NAME, marker, dbFile), 20_000),
  };
}
