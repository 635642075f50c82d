// What the stack manager needs from each backing service.
import { isLoopback } from '../../platform/config/endpoints.js';

export interface Probe {
  answering: boolean;
  detail: string;
}

export interface Service {
  name: string;
  /** The endpoint clients use (from the environment or the default). */
  endpoint: string;
  /** False when the endpoint is not ours (see `manages`): we then only probe it, never start it. */
  managed: boolean;
  /** Checks that the toolchain is present and builds or downloads cached artifacts. */
  install(): Promise<void>;
  /** The pid of our running process, if any. */
  pid(): number | undefined;
  /** Starts the process (after install) and waits until it answers a real request. */
  start(): Promise<void>;
  /** Sends a real request: a query, a metadata call, a namespace describe. */
  probe(): Promise<Probe>;
  /** Runs on every `up` once the service answers (idempotent setup such as topics). */
  ready?(): Promise<string>;
  /**
   * The secured stack, after its server certificate was made again: serve the new one without a
   * restart and wait until it is presented; says what it did.
   */
  rotate?(): Promise<string>;
  /** Stops our process only. */
  stop(): Promise<boolean>;
  /** The port that must be free for us to start. */
  port: number;
  log: string;
}

/**
 * Whether the stack manager starts and stops the service `name` whose clients reach it at `host`:
 * when the host is loopback, or, with RODS_STACK_MANAGE=1, whatever the host (the operator says
 * the address is this machine's own, e.g. a stack in a network namespace of its own or on a VM's
 * interface; the service then listens on that address only). RODS_MANAGE_<NAME>=0 leaves the
 * service alone in any case.
 */
export function manages(host: string, name: string, env: NodeJS.ProcessEnv = process.env): boolean {
  if (env[`RODS_MANAGE_${name.toUpperCase()}`] === '0') return false;
  return isLoopback(host) || env.RODS_STACK_MANAGE === '1';
}
