// Connections to the Temporal server, from the configured endpoint.
import { Client, Connection, WorkflowNotFoundError } from '@temporalio/client';
import { NativeConnection } from '@temporalio/worker';
import { loadEndpoints } from '../config/endpoints.js';

export async function temporalClient(): Promise<{ client: Client; close: () => Promise<void> }> {
  const { temporalAddress, temporalNamespace } = loadEndpoints();
  const connection = await Connection.connect({ address: temporalAddress });
  return {
    client: new Client({ connection, namespace: temporalNamespace }),
    close: () => connection.close(),
  };
}

export async function workerConnection(): Promise<NativeConnection> {
  return NativeConnection.connect({ address: loadEndpoints().temporalAddress });
}

export function temporalNamespace(): string {
  return loadEndpoints().temporalNamespace;
}

let runtimeInstalled = false;

/** Installs the worker runtime with a logger at the given level (once per process, before any worker). */
export async function installWorkerRuntime(
  level: 'TRACE' | 'DEBUG' | 'INFO' | 'WARN' | 'ERROR' = 'WARN',
): Promise<void> {
  if (runtimeInstalled) return;
  const { DefaultLogger, Runtime } = await import('@temporalio/worker');
  Runtime.install({ logger: new DefaultLogger(level) });
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
