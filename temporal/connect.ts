// Connections to the Temporal server, from the configured endpoint.
import { Client, Connection } from '@temporalio/client';
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
