// What the stack manager needs from each backing service.

export interface Probe {
  answering: boolean;
  detail: string;
}

export interface Service {
  name: string;
  /** The endpoint clients use (from the environment or the default). */
  endpoint: string;
  /** False when the endpoint is not on loopback: we then only probe it, never start it. */
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
  /** Stops our process only. */
  stop(): Promise<boolean>;
  /** The port that must be free for us to start. */
  port: number;
  log: string;
}
