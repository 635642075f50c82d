// Temporal dev server from the `temporal` CLI built from its Go module, persisted in SQLite.
import { existsSync, mkdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { Connection } from '@temporalio/client';
import { isLoopback, loadEndpoints, splitHostPort } from '../../config/endpoints.js';
import { paths } from './paths.js';
import { clearPid, ourPid, run, StackError, spawnDetached, tail, terminate, waitFor, which } from './proc.js';
import type { Probe, Service } from './service.js';

const NAME = 'temporal';
export const TEMPORAL_CLI_VERSION = '1.5.1';

/** Dynamic config the dev server starts with; extra `key=value` pairs via RODS_TEMPORAL_DYNAMIC_CONFIG (comma-separated). */
function dynamicConfig(): string[] {
  const base = [
    'frontend.enableUpdateWorkflowExecution=true',
    'frontend.enableUpdateWorkflowExecutionAsyncAccepted=true',
  ];
  const extra = (process.env.RODS_TEMPORAL_DYNAMIC_CONFIG ?? '')
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

export function temporalService(): Service {
  const { temporalAddress, temporalNamespace } = loadEndpoints();
  const { host, port } = splitHostPort(temporalAddress);
  const binary = path.join(paths.bin, 'temporal');
  const stamp = path.join(paths.bin, `.temporal-${TEMPORAL_CLI_VERSION}`);
  const dbFile = path.join(paths.data, 'temporal', 'temporal.db');
  const log = paths.log(NAME);
  const marker = `--port ${port} --http-port`;

  const probe = () => probeTemporal(temporalAddress, temporalNamespace);

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
      const pid = spawnDetached(NAME, binary, [
        'server',
        'start-dev',
        '--headless',
        '--ip',
        host,
        '--port',
        String(port),
        '--http-port',
        String(Number(process.env.RODS_TEMPORAL_HTTP_PORT ?? port + 1000)),
        '--metrics-port',
        String(Number(process.env.RODS_TEMPORAL_METRICS_PORT ?? port + 2000)),
        '--namespace',
        temporalNamespace,
        '--db-filename',
        dbFile,
        '--log-level',
        'warn',
        ...dynamicConfig(),
      ]);
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
    async stop() {
      const pid = ourPid(NAME, marker, dbFile);
      if (!pid) {
        clearPid(NAME);
        return false;
      }
      await terminate(pid, 20_000);
      clearPid(NAME);
      return true;
    },
  };
}
