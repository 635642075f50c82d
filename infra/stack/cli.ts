// The local stack: `npm run stack:up|stack:down|stack:status`. Starts PostgreSQL, Kafka (KRaft)
// and the Temporal dev server on loopback, each considered up only once it answers a real
// request. Idempotent: `up` on a running stack changes nothing and repairs a half-started one.
import { spawnSync } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import path from 'node:path';
import { Command } from 'commander';
import { ConfigError } from '../../platform/config/endpoints.js';
import { loadSecretFiles } from '../../platform/config/secret-files.js';
import { executorService } from './executor.js';
import { kafkaService } from './kafka.js';
import { linkInstalled } from './link.js';
import { ensureDirs, paths, stackDir } from './paths.js';
import { postgresService } from './postgres.js';
import { portOpen, portOwner, StackError, sleep, tail } from './proc.js';
import {
  certNames,
  ensureSecureFiles,
  fingerprintOf,
  isSecureStack,
  secureFiles,
  secureStackEnv,
  shellExports,
} from './secure.js';
import type { Service } from './service.js';
import { temporalService } from './temporal.js';
import { vllmService } from './vllm.js';

export function services(opts: { upgradeRunning?: boolean } = {}): Service[] {
  return [postgresService(opts), kafkaService(), temporalService(), executorService()];
}

/** The services `up` starts without --services. */
export const SERVICE_NAMES = ['postgres', 'kafka', 'temporal', 'executor'] as const;
/**
 * Services started only when asked for (`--vllm` or `--services vllm`): vLLM is a 6 GB install
 * and takes minutes to start. `down` and `status` include it whenever ours runs.
 */
export const OPT_IN_SERVICE_NAMES = ['vllm'] as const;
const ALL_NAMES: readonly string[] = [...SERVICE_NAMES, ...OPT_IN_SERVICE_NAMES];

export interface PickOptions {
  upgradeRunning?: boolean;
  /** `--vllm`: add vLLM to the services picked. */
  vllm?: boolean;
  /** `down`, `status`: add an opt-in service whose process of ours runs. */
  running?: boolean;
}

/**
 * `--services a,b`: the services of that list, by name (each machine of a deployment runs its
 * own: the backing services on one, the executor beside the worker on another). None: all but
 * the opt-in ones.
 */
export function pickServices(list: string | undefined, opts: PickOptions = {}): Service[] {
  const names =
    list === undefined
      ? [...SERVICE_NAMES]
      : list
          .split(',')
          .map((s) => s.trim())
          .filter(Boolean);
  const unknown = names.filter((n) => !ALL_NAMES.includes(n));
  if (unknown.length > 0 || names.length === 0)
    throw new StackError(
      `--services takes a comma-separated list of ${ALL_NAMES.join(', ')}; got ${JSON.stringify(list)}`,
    );
  const make: Record<string, () => Service> = {
    postgres: () => postgresService(opts),
    kafka: kafkaService,
    temporal: temporalService,
    executor: executorService,
    vllm: () => vllmService(),
  };
  const vllm =
    opts.vllm ||
    names.includes('vllm') ||
    (opts.running && list === undefined && vllmService().pid() !== undefined);
  return ALL_NAMES.filter((n) => names.includes(n) || (n === 'vllm' && vllm)).map((n) => make[n]!());
}

export interface ServiceStatus {
  service: string;
  endpoint: string;
  managed: boolean;
  pid: number | null;
  answering: boolean;
  detail: string;
}

export async function status(list: Service[] = services()): Promise<ServiceStatus[]> {
  return Promise.all(
    list.map(async (s) => {
      const p = await s.probe();
      return {
        service: s.name,
        endpoint: s.endpoint,
        managed: s.managed,
        pid: s.pid() ?? null,
        answering: p.answering,
        detail: p.detail,
      };
    }),
  );
}

const secs = (ms: number) => `${(ms / 1000).toFixed(1)}s`;

async function bringUp(s: Service): Promise<string> {
  const t0 = Date.now();
  let probe = await s.probe();
  if (probe.answering) {
    const note = s.pid() ? 'already up' : 'answering (a process not started by this stack; left alone)';
    const extra = s.ready ? `; ${await s.ready()}` : '';
    return `${note}: ${probe.detail}${extra}`;
  }
  if (!s.managed) {
    throw new StackError(
      `${s.endpoint} does not answer and is not on loopback, so the stack does not start it (RODS_STACK_MANAGE=1: the address is this machine's, manage it): ${probe.detail}`,
      s.name,
    );
  }
  const existing = s.pid();
  if (existing) {
    // Ours but not answering: give a starting process a moment, then repair by restarting.
    for (let i = 0; i < 20 && !probe.answering; i++) {
      await sleep(500);
      probe = await s.probe();
    }
    if (probe.answering) {
      // Answering again (a Kafka controller election, say): its readiness step still runs, so a
      // node of the cluster that died is started again.
      const extra = s.ready ? `; ${await s.ready()}` : '';
      return `already up (was starting): ${probe.detail}${extra}`;
    }
    console.log(`[${s.name}] pid ${existing} is ours but does not answer (${probe.detail}); restarting it`);
    await s.stop();
  }
  if (await portOpen('127.0.0.1', s.port)) {
    throw new StackError(
      `port ${s.port} is taken by ${await portOwner(s.port)}, which is not ours and does not answer as ${s.name}; stop it or point the endpoint elsewhere (it was not touched)`,
      s.name,
      false,
    );
  }
  const t1 = Date.now();
  await s.install();
  const t2 = Date.now();
  await s.start();
  const t3 = Date.now();
  const extra = s.ready ? `; ${await s.ready()}` : '';
  probe = await s.probe();
  return `started (install ${secs(t2 - t1)}, start ${secs(t3 - t2)}, total ${secs(Date.now() - t0)}): ${probe.detail}${extra}`;
}

export async function up(list: Service[] = services()): Promise<void> {
  ensureDirs();
  const t0 = Date.now();
  const results = await Promise.allSettled(
    list.map(async (s) => {
      const msg = await bringUp(s);
      console.log(`[${s.name}] ${msg}`);
    }),
  );
  const failed = results.flatMap((r, i) =>
    r.status === 'rejected' ? [{ s: list[i]!, e: r.reason as Error }] : [],
  );
  if (failed.length > 0) {
    for (const { s, e } of failed) {
      console.error(`\n[${s.name}] FAILED: ${e.message}`);
      const relevant = !(e instanceof StackError) || e.logRelevant;
      if (relevant && !e.message.includes('--- tail of'))
        console.error(`--- tail of ${s.log} ---\n${tail(s.log)}`);
    }
    throw new StackError(
      `stack:up failed for ${failed.map((f) => f.s.name).join(', ')}:\n${failed.map((f) => `[${f.s.name}] ${f.e.message.split('\n')[0]}`).join('\n')}`,
    );
  }
  console.log(`stack up in ${secs(Date.now() - t0)} (data and logs in ${paths.stack})`);
}

export async function down(list: Service[] = services()): Promise<void> {
  for (const s of [...list].reverse()) {
    if (!s.managed) continue;
    const stopped = await s.stop();
    console.log(`[${s.name}] ${stopped ? 'stopped' : 'was not running (nothing of ours to stop)'}`);
  }
}

export interface Rotation {
  /** Fingerprints (SHA-256) of the server certificate before and after. */
  before: string;
  after: string;
  /** What each running service did to present the new one. */
  services: Record<string, string>;
}

/**
 * Makes the secured stack's server certificate again (new key, same names, same CA) and has every
 * running service present it without a restart: Kafka's brokers reload their keystore, nginx and
 * PostgreSQL reload. A gateway started with the stack's certificate files takes the new pair at
 * its next poll of them; the executor keeps the previous (still valid) one until it restarts.
 */
export async function rotateCertificates(list: Service[] = services()): Promise<Rotation> {
  if (!isSecureStack())
    throw new StackError('rotate-certs rotates the secured stack: npm run stack -- rotate-certs --secure');
  const f = secureFiles(paths.stack);
  const before = fingerprintOf(f.serverCert);
  ensureSecureFiles(paths.stack, { rotate: true, names: certNames(f.serverCert) });
  const out: Rotation = { before, after: fingerprintOf(f.serverCert), services: {} };
  for (const s of list) if (s.rotate && s.managed) out.services[s.name] = await s.rotate();
  return out;
}

function printTable(rows: ServiceStatus[]): void {
  for (const r of rows) {
    const state = r.answering ? 'answering' : 'DOWN';
    const owner = r.pid ? `pid ${r.pid}` : r.managed ? 'not running' : 'external';
    console.log(
      `${r.service.padEnd(9)} ${state.padEnd(10)} ${r.endpoint.padEnd(40)} ${owner.padEnd(12)} ${r.detail}`,
    );
  }
}

/**
 * `--secure`: the secured stack in .stack/secure (infra/stack/secure.ts). Its certificates and
 * passwords are made (once), `env.sh` written, and this command runs again with that environment:
 * the stack's modules read their folder and endpoints when they load.
 */
function runSecured(argv: string[]): never {
  const shared = stackDir();
  const dir = path.join(shared, 'secure');
  linkInstalled(shared, dir);
  ensureSecureFiles(dir);
  const env = secureStackEnv(dir);
  const envFile = path.join(dir, 'env.sh');
  writeFileSync(envFile, shellExports(env), { mode: 0o600 });
  const child = { ...process.env, ...env };
  // Settings of another database would fight the stack's own.
  for (const k of ['DATABASE_URL', 'RODS_MIGRATE_DATABASE_URL']) delete child[k];
  const r = spawnSync(process.execPath, [...process.execArgv, ...argv.slice(1)], {
    stdio: 'inherit',
    env: child,
  });
  if (r.status === 0 && argv.includes('up'))
    console.log(
      `point rods at the secured stack with: source ${path.relative(process.cwd(), envFile) || envFile}`,
    );
  process.exit(r.status ?? 1);
}

async function main(argv: string[]): Promise<void> {
  if (argv.includes('--secure') && !isSecureStack()) runSecured(argv);
  loadSecretFiles(); // DATABASE_URL_FILE names a database elsewhere: probed, not started here
  const program = new Command('stack')
    .description(
      'Manage the local rods stack: PostgreSQL 15, Kafka (KRaft), the Temporal dev server and the environment\n' +
        'executor on loopback; with --vllm (opt-in) also vLLM as the generator (an OpenAI-compatible server).\n' +
        'With --secure, the secured stack in .stack/secure: Kafka SASL_SSL with SCRAM and ACLs, PostgreSQL\n' +
        'TLS-only (verify-full), Temporal behind nginx demanding a client certificate, the executor with a\n' +
        'token; certificates and passwords in .stack/secure/secrets, its settings in .stack/secure/env.sh.',
    )
    .showHelpAfterError();
  const secureOpt = '--secure';
  const secureHelp = 'the secured stack (.stack/secure; see above)';
  const servicesOpt = '--services <list>';
  const servicesHelp = `only these services (comma-separated: ${ALL_NAMES.join(', ')}); default all but vllm`;
  const vllmOpt = '--vllm';
  const vllmHelp =
    'also vLLM (opt-in: a 6.3 GB venv built once, about 5 minutes; 1 to 2 minutes to start, about 4 GB of memory): ' +
    'its OpenAI-compatible server on 127.0.0.1:$RODS_VLLM_PORT (8000), a tiny local model or RODS_VLLM_MODEL=DIR';
  type Opts = { services?: string; vllm?: boolean };
  program
    .command('up')
    .description(
      'install what is missing (cached under .stack/), start every service, wait until each answers',
    )
    // Also upgrades a running PostgreSQL set up by an older version (passwords, roles, grants).
    .option(secureOpt, secureHelp)
    .option(servicesOpt, servicesHelp)
    .option(vllmOpt, vllmHelp)
    .action(async (opts: Opts) =>
      up(pickServices(opts.services, { upgradeRunning: true, vllm: opts.vllm ?? false })),
    );
  program
    .command('down')
    .description(
      'stop exactly the processes `up` started (by pid file and command line), never others; vLLM too when ours runs',
    )
    .option(secureOpt, secureHelp)
    .option(servicesOpt, servicesHelp)
    .option(vllmOpt, 'also vLLM (stopped anyway without --services when ours runs)')
    .action(async (opts: Opts) =>
      down(pickServices(opts.services, { vllm: opts.vllm ?? false, running: true })),
    );
  program
    .command('status')
    .description(
      'probe every service with a real request (vLLM too when ours runs or with --vllm); exit 1 if any does not answer',
    )
    .option('--json', 'print a JSON array of {service, endpoint, managed, pid, answering, detail}')
    .option(secureOpt, secureHelp)
    .option(servicesOpt, servicesHelp)
    .option(vllmOpt, 'also vLLM (shown anyway without --services when ours runs)')
    .action(async (opts: Opts & { json?: boolean }) => {
      const rows = await status(pickServices(opts.services, { vllm: opts.vllm ?? false, running: true }));
      if (opts.json) console.log(JSON.stringify(rows, null, 2));
      else printTable(rows);
      if (rows.some((r) => !r.answering)) process.exitCode = 1;
    });
  program
    .command('rotate-certs')
    .description(
      'secured stack: make a new server certificate (new key, same names and CA) and have Kafka, nginx (Temporal) and PostgreSQL present it without a restart; a running gateway takes it within seconds',
    )
    .option(secureOpt, secureHelp)
    .option('--json', 'print {before, after, services} (SHA-256 fingerprints; what each service did)')
    .action(async (opts: { json?: boolean }) => {
      const r = await rotateCertificates();
      if (opts.json) console.log(JSON.stringify(r, null, 2));
      else {
        console.log(`server certificate ${r.before} -> ${r.after}`);
        for (const [name, what] of Object.entries(r.services)) console.log(`[${name}] ${what}`);
      }
    });
  await program.parseAsync(argv);
}

if (import.meta.url === `file://${process.argv[1]}`) {
  main(process.argv).catch((e: Error) => {
    console.error(e instanceof StackError || e instanceof ConfigError ? e.message : e.stack);
    process.exit(1);
  });
}
