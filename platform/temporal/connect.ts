// Connections to the Temporal server, from the configured endpoint.
import { Client, Connection, WorkflowNotFoundError } from '@temporalio/client';
import { NativeConnection } from '@temporalio/worker';
import { withTlsMeaning } from '../util/tls-refusal.js';
import {
  type TemporalConnectOptions,
  temporalConnectOptions,
  tlsHandshakeProblem,
} from './connect-options.js';

export const DEFAULT_TASK_QUEUE = 'rods';
/** The name of the error a connection gets when Temporal's TLS handshake fails. */
export const TLS_HANDSHAKE_ERROR = 'TlsHandshakeError';

/** The task queue the worker serves and clients start workflows on (RODS_TASK_QUEUE, default rods). */
export function taskQueue(): string {
  return process.env.RODS_TASK_QUEUE || DEFAULT_TASK_QUEUE;
}

/**
 * A client of the configured Temporal server. `lazy`: connect on first use instead of now, for
 * long-running processes that must start (and answer not-ready) while Temporal is down.
 */
export async function temporalClient(
  opts: { lazy?: boolean } = {},
): Promise<{ client: Client; close: () => Promise<void> }> {
  const t = temporalConnectOptions();
  const connection = opts.lazy ? Connection.lazy(clientOptions(t)) : await connectOrSayWhy(t);
  return {
    client: new Client({ connection, namespace: t.namespace }),
    close: () => connection.close(),
  };
}

/** Connects; a failure over TLS says what the handshake met (gRPC says only "deadline"). */
async function connectOrSayWhy(t: TemporalConnectOptions, connectTimeout?: number): Promise<Connection> {
  try {
    return await Connection.connect(clientOptions(t, connectTimeout));
  } catch (e) {
    const why = await tlsHandshakeProblem(t);
    if (!why) throw e;
    const err = new Error(
      withTlsMeaning(`Temporal at ${t.address} (${t.describe}): the TLS handshake failed: ${why}`),
      {
        cause: e,
      },
    );
    // Reached but refused: not to be reported as a service that does not answer (entry/cli/errors.ts).
    err.name = TLS_HANDSHAKE_ERROR;
    throw err;
  }
}

function clientOptions(t: TemporalConnectOptions, connectTimeout?: number) {
  return {
    address: t.address,
    ...(t.tls ? { tls: t.tls } : {}),
    ...(t.apiKey !== undefined ? { apiKey: t.apiKey } : {}),
    ...(t.metadata ? { metadata: t.metadata } : {}),
    ...(connectTimeout ? { connectTimeout } : {}),
  };
}

/** How often a worker re-reads TEMPORAL_API_KEY_FILE (the native connection holds a string). */
const API_KEY_REREAD_MS = 60_000;

export async function workerConnection(): Promise<NativeConnection> {
  const t = temporalConnectOptions();
  const key = typeof t.apiKey === 'function' ? t.apiKey : undefined;
  const connection = await NativeConnection.connect({
    address: t.address,
    ...(t.tls ? { tls: t.tls } : {}),
    ...(t.apiKey !== undefined ? { apiKey: key ? key() : (t.apiKey as string) } : {}),
    ...(t.metadata ? { metadata: t.metadata } : {}),
  });
  if (key) {
    // A rotated key file is taken without a restart; an unreadable one keeps the key in use.
    let current = key();
    const timer = setInterval(() => {
      try {
        const next = key();
        if (next !== current) void connection.setApiKey(next).then(() => (current = next));
      } catch {
        /* the file is being replaced: next round */
      }
    }, API_KEY_REREAD_MS);
    timer.unref();
    const close = connection.close.bind(connection);
    connection.close = async () => {
      clearInterval(timer);
      await close();
    };
  }
  return connection;
}

/** Waits, with backoff, until the Temporal server accepts a connection (a worker starting during an outage). */
export async function waitForTemporal(onWait?: (e: Error) => void): Promise<void> {
  for (let attempt = 0; ; attempt++) {
    try {
      const c = await connectOrSayWhy(temporalConnectOptions(), 5000);
      await c.close();
      return;
    } catch (e) {
      if (attempt === 0)
        (onWait ?? ((x) => console.error(`Temporal unreachable (${x.message}); waiting for it ...`)))(
          e as Error,
        );
      await new Promise((r) => setTimeout(r, Math.min(5000, 250 * 2 ** attempt)));
    }
  }
}

export function temporalNamespace(): string {
  return temporalConnectOptions().namespace;
}

let runtimeInstalled = false;

/**
 * Installs the worker runtime with a logger at the given level (once per process, before any
 * worker). A runtime the process installed already (an embedding program's, a test setup's) stays.
 */
export async function installWorkerRuntime(
  level: 'TRACE' | 'DEBUG' | 'INFO' | 'WARN' | 'ERROR' = 'WARN',
): Promise<void> {
  if (runtimeInstalled) return;
  const { DefaultLogger, Runtime } = await import('@temporalio/worker');
  try {
    Runtime.install({ logger: new DefaultLogger(level) });
  } catch (e) {
    if (!/already been installed/.test((e as Error).message)) throw e;
  }
  runtimeInstalled = true;
}

/**
 * Runs a workflow update, retrying when the server refuses it because a workflow task failed at
 * that moment (FAILED_PRECONDITION "unexpected workflow task failure", e.g. the workflow was
 * completing a task as the update arrived): the update was not applied, so a retry is safe.
 */
export async function executeUpdateWithRetry<R>(
  handle: { executeUpdate: (name: string, opts: { args: [unknown] } | undefined) => Promise<unknown> },
  name: string,
  args?: [unknown],
  attempts = 8,
): Promise<R> {
  for (let i = 1; ; i++) {
    try {
      return (await handle.executeUpdate(name, args ? { args } : undefined)) as R;
    } catch (e) {
      const msg = `${(e as Error).message} ${String((e as { cause?: Error }).cause?.message ?? '')}`;
      if (i >= attempts || !/workflow task failure/i.test(msg)) throw e;
      await new Promise((r) => setTimeout(r, 250 * i));
    }
  }
}

/** Whether Temporal knows a workflow execution with this id (running, or closed and retained). */
export async function workflowExists(client: Client, workflowId: string): Promise<boolean> {
  try {
    await client.workflow.getHandle(workflowId).describe();
    return true;
  } catch (e) {
    if (e instanceof WorkflowNotFoundError) return false;
    throw e;
  }
}

/** How a workflow execution ended: 'running' while it runs, 'not-found' when Temporal does not know it. */
export type WorkflowEnd =
  | 'running'
  | 'completed'
  | 'failed'
  | 'terminated'
  | 'timed-out'
  | 'cancelled'
  | 'not-found';

/** The state of the latest run of a workflow id, as a WorkflowEnd. */
export async function workflowEnd(client: Client, workflowId: string): Promise<WorkflowEnd> {
  try {
    const { status } = await client.workflow.getHandle(workflowId).describe();
    switch (status.name) {
      case 'COMPLETED':
        return 'completed';
      case 'FAILED':
        return 'failed';
      case 'TERMINATED':
        return 'terminated';
      case 'TIMED_OUT':
        return 'timed-out';
      case 'CANCELLED':
        return 'cancelled';
      default:
        // RUNNING, PAUSED; a continued-as-new run has a successor that runs.
        return 'running';
    }
  } catch (e) {
    if (e instanceof WorkflowNotFoundError) return 'not-found';
    throw e;
  }
}
