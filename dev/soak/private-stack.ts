// A private copy of the local stack for the soak: its own PostgreSQL cluster, Kafka (one broker or
// a three-node cluster),
// a Temporal dev server and executor, on free ports, with data under .stack/soak/<run>. The fault
// injector stops and kills these, never the shared stack other tests use. Installed artifacts
// (the temporal binary, Kafka's jars, the executor's venv) are linked from the shared stack, so
// only the data is fresh.
import { randomBytes } from 'node:crypto';
import { rmSync } from 'node:fs';
import path from 'node:path';
import { linkInstalled } from '../../infra/stack/link.js';
import { ensureSecureFiles, secureStackEnv } from '../../infra/stack/secure.js';
import { freeServicePort } from '../../platform/util/free-port.js';

export const SERVICE_NAMES = ['postgres', 'kafka', 'temporal', 'executor'] as const;
export type ServiceName = (typeof SERVICE_NAMES)[number];

export interface PrivateStackLayout {
  dir: string;
  env: Record<string, string>;
}

/**
 * Chooses ports and a folder and returns the environment that points every rods module at them.
 * It must be applied to process.env before infra/stack is imported (its paths are read at load).
 */
export async function layoutPrivateStack(
  sharedStack: string,
  run: string,
  opts: { kafkaNodes?: number; secure?: boolean } = {},
): Promise<PrivateStackLayout> {
  const dir = privateStackDir(sharedStack, run);
  rmSync(dir, { recursive: true, force: true });
  linkInstalled(sharedStack, dir);
  const ports: number[] = [];
  const port = async (span = 1) => {
    for (;;) {
      const p = await freeServicePort();
      // Kafka's controller and Temporal's extra ports are chosen next to each other: keep apart.
      const wanted = Array.from({ length: span }, (_, i) => p + i);
      if (!wanted.some((x) => ports.includes(x))) {
        ports.push(...wanted);
        return p;
      }
    }
  };
  if (opts.secure) return secureLayout(dir, opts.kafkaNodes ?? 1, port);
  const pg = await port();
  // One Kafka node, or a cluster (three: replication 3, min.insync.replicas 2).
  const kafka: number[] = [];
  const controllers: number[] = [];
  for (let i = 0; i < (opts.kafkaNodes ?? 1); i++) {
    kafka.push(await port());
    controllers.push(await port());
  }
  const temporal = await port();
  const temporalHttp = await port();
  const temporalMetrics = await port();
  const executor = await port();
  // Passwords of its own (the stack sets them on its roles; the superuser's goes to its secrets).
  const pw = () => randomBytes(18).toString('base64url');
  return {
    dir,
    env: {
      RODS_STACK_DIR: dir,
      DATABASE_URL: `postgres://rods:${pw()}@127.0.0.1:${pg}/rods`,
      RODS_MIGRATE_DATABASE_URL: `postgres://rods_owner:${pw()}@127.0.0.1:${pg}/rods`,
      KAFKA_BROKERS: kafka.map((p) => `127.0.0.1:${p}`).join(','),
      RODS_KAFKA_CONTROLLER_PORTS: controllers.join(','),
      RODS_KAFKA_HEAP: kafka.length > 1 ? '384m' : '512m',
      TEMPORAL_ADDRESS: `127.0.0.1:${temporal}`,
      RODS_TEMPORAL_HTTP_PORT: String(temporalHttp),
      RODS_TEMPORAL_METRICS_PORT: String(temporalMetrics),
      // No Web UI: its port would sit next to a random one.
      RODS_TEMPORAL_UI_PORT: '0',
      RODS_EXECUTOR_URL: `http://127.0.0.1:${executor}`,
    },
  };
}

/** The private stack's folder for a run. */
export function privateStackDir(sharedStack: string, run: string): string {
  return path.join(sharedStack, 'soak', run);
}

/**
 * The secured private stack (infra/stack/secure.ts): Kafka SASL_SSL with SCRAM and ACLs on every
 * node, PostgreSQL TLS-only with verify-full, Temporal behind nginx with mutual TLS, the executor
 * over HTTPS with its token; certificates for `localhost` under the run's folder.
 */
async function secureLayout(
  dir: string,
  kafkaNodes: number,
  port: (span?: number) => Promise<number>,
): Promise<PrivateStackLayout> {
  const kafka: number[] = [];
  const controllers: number[] = [];
  for (let i = 0; i < kafkaNodes; i++) {
    kafka.push(await port());
    controllers.push(await port());
  }
  const ports = {
    kafka: kafka[0]!,
    kafkaController: controllers[0]!,
    postgres: await port(),
    temporal: await port(),
    // The dev server's HTTP and metrics ports are its port + 1 and + 2.
    temporalInternal: await port(3),
    executor: await port(),
  };
  ensureSecureFiles(dir, { names: ['localhost'] });
  return {
    dir,
    env: {
      ...secureStackEnv(dir, ports, 'localhost'),
      KAFKA_BROKERS: kafka.map((p) => `localhost:${p}`).join(','),
      RODS_KAFKA_CONTROLLER_PORTS: controllers.join(','),
      RODS_KAFKA_HEAP: kafka.length > 1 ? '384m' : '512m',
    },
  };
}
