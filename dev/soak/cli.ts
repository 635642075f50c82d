// `npm run soak -- --steps N --seed S [--json]`: the chaos soak on a private stack. Exit 0 when
// every invariant holds, 1 when one does not, 2 when the soak itself could not run.
// Only builtins, commander and modules that read no paths at load are imported statically: the
// private stack's environment must be in place before infra/stack/paths.ts reads it.
import { spawnSync } from 'node:child_process';
import { mkdirSync, rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { format } from 'node:util';
import { Command, InvalidArgumentError } from 'commander';
import { ANOTHER_STACKS_SETTINGS } from '../../infra/stack/secure.js';
import { loadSecretFiles } from '../../platform/config/secret-files.js';
import { layoutPrivateStack, privateStackDir } from './private-stack.js';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');

const int = (name: string, min: number) => (v: string) => {
  const n = Number(v);
  if (!Number.isSafeInteger(n) || n < min)
    throw new InvalidArgumentError(`${name} must be an integer >= ${min}`);
  return n;
};

const program = new Command('soak')
  .description(
    'Chaos soak: runs a campaign through the gateway with a simulated trainer (several batches a step, duplicate sends, retrying and one-shot clients) and the stand-in generator with faults on, on a private stack, while a seeded injector kill -9s the worker, the two aggregators, the relay, the gateway and the executor, stops PostgreSQL (once for 60 s or more), Kafka and Temporal, kill -9s a broker and the active controller of the three-node Kafka cluster, freezes an aggregator inside a transaction (SIGSTOP), sends a step while the worker and the brokers are down so that it is published after three later steps, and writes poison and array, string and map bombs to the reward topic. Then checks: every accepted group counted exactly once, every step closed in order, no leaked synthesis slot, candidates injected or queued once, replay equal to live, a clean audit, and dead letters that are exactly the poison.',
  )
  .option('--steps <n>', 'training steps', int('--steps', 4), 30)
  .option('--seed <n>', 'seed of the fault plan, the trainer and the generator', int('--seed', 0), 1)
  .option('--per-category <n>', 'BFCL seed tasks per category (4 categories)', int('--per-category', 1), 10)
  .option('--batches-per-step <n>', 'rollout batches per step', int('--batches-per-step', 1), 3)
  .option(
    '--per-kind <n>',
    'faults of each kind (default: one per 60 steps, at least one)',
    int('--per-kind', 1),
  )
  .option('--long-outage-s <s>', 'length of the first PostgreSQL outage', int('--long-outage-s', 1), 62)
  .option(
    '--kafka-nodes <n>',
    'Kafka nodes of the private stack: 3 (replication 3, min.insync.replicas 2; adds kill -9 of a broker and of the active controller) or 1',
    (v: string) => {
      if (v !== '1' && v !== '3') throw new InvalidArgumentError('--kafka-nodes must be 1 or 3');
      return Number(v);
    },
    3,
  )
  .option(
    '--secure',
    'on a secured private stack (Kafka SASL_SSL with SCRAM and ACLs, PostgreSQL verify-full, Temporal mutual TLS through nginx, HTTPS gateway and executor); adds a server certificate rotation mid-campaign (Kafka, PostgreSQL, nginx and the running gateway take the new one without a restart)',
  )
  .option('--out <dir>', 'report folder (logs of every process, faults.json, report.json)')
  .option('--keep-stack', 'leave the private stack running and its data in place')
  .option('--json', 'print only the JSON report on stdout (progress goes to stderr)')
  .showHelpAfterError();

async function main(): Promise<number> {
  program.parse(process.argv);
  const o = program.opts<{
    steps: number;
    seed: number;
    perCategory: number;
    batchesPerStep: number;
    perKind?: number;
    longOutageS: number;
    kafkaNodes: number;
    secure?: boolean;
    out?: string;
    keepStack?: boolean;
    json?: boolean;
  }>();
  // A secured run laid out its stack, then ran this again (RODS_SOAK_RUN) with its environment:
  // Node reads NODE_EXTRA_CA_CERTS (the stack's CA, for the gateway's HTTPS) only when it starts.
  const relaunched = process.env.RODS_SOAK_RUN;
  const run =
    relaunched ??
    `${new Date()
      .toISOString()
      .replace(/[^0-9]/g, '')
      .slice(0, 14)}-s${o.seed}${o.secure ? '-secure' : ''}`;
  const shared = path.join(ROOT, '.stack');
  if (o.secure && !relaunched) {
    const layout = await layoutPrivateStack(shared, run, { kafkaNodes: o.kafkaNodes, secure: true });
    const env: NodeJS.ProcessEnv = { ...process.env, ...layout.env, RODS_SOAK_RUN: run };
    for (const k of ANOTHER_STACKS_SETTINGS) if (!(k in layout.env)) delete env[k];
    const r = spawnSync(process.execPath, [...process.execArgv, ...process.argv.slice(1)], {
      stdio: 'inherit',
      env,
    });
    if (r.status === null) rmSync(layout.dir, { recursive: true, force: true });
    return r.status ?? 2;
  }
  const out = path.resolve(o.out ?? path.join(ROOT, 'reports', 'soak', run));
  mkdirSync(out, { recursive: true });
  const layout = relaunched
    ? { dir: privateStackDir(shared, run), env: {} }
    : await layoutPrivateStack(shared, run, { kafkaNodes: o.kafkaNodes });
  Object.assign(process.env, layout.env);
  // The secured stack names its database URLs by file (DATABASE_URL_FILE).
  loadSecretFiles();
  // Progress and the stack's own messages go to stderr; stdout carries the report only.
  console.log = (...a: unknown[]) => process.stderr.write(`${format(...a)}\n`);
  const log = (line: string) =>
    process.stderr.write(`[soak ${new Date().toISOString().slice(11, 19)}] ${line}\n`);
  const { runSoak } = await import('./run.js');
  const { down } = await import('../../infra/stack/cli.js');
  const { supervisors } = await import('./processes.js');
  // Interrupted: take down what this run started (its processes and its private stack) first.
  for (const sig of ['SIGINT', 'SIGTERM'] as const)
    process.once(sig, () => {
      log(`${sig}: stopping the soak's processes and its private stack ...`);
      for (const s of supervisors) s.killAll();
      down()
        .catch(() => {})
        .finally(() => {
          if (!o.keepStack) rmSync(layout.dir, { recursive: true, force: true });
          process.exit(130);
        });
    });
  try {
    const report = await runSoak({
      steps: o.steps,
      seed: o.seed,
      out,
      root: ROOT,
      perCategory: o.perCategory,
      batchesPerStep: o.batchesPerStep,
      perKind: o.perKind,
      longOutageMs: o.longOutageS * 1000,
      kafkaNodes: o.kafkaNodes,
      secure: Boolean(o.secure),
      log,
    });
    writeFileSync(path.join(out, 'report.json'), `${JSON.stringify(report, null, 2)}\n`);
    const failed = Object.entries(report.invariants).filter(([, ok]) => !ok);
    if (o.json) process.stdout.write(`${JSON.stringify(report)}\n`);
    else {
      process.stdout.write(
        `${report.steps} steps in ${report.wall_s} s; faults ${JSON.stringify(report.faults_by_kind)}\n` +
          `longest step ${report.max_step_stall_s} s (step ${report.max_step_stall_step}: ${report.max_step_stall_cause})\n` +
          Object.entries(report.invariants)
            .map(([k, ok]) => `  ${ok ? 'ok  ' : 'FAIL'} ${k}: ${report.evidence[k]}`)
            .join('\n') +
          `\nreport: ${path.join(out, 'report.json')}\n`,
      );
    }
    return failed.length ? 1 : 0;
  } finally {
    if (!o.keepStack) {
      await down().catch((e: Error) => log(`stopping the private stack: ${e.message}`));
      rmSync(layout.dir, { recursive: true, force: true });
    } else log(`private stack left running in ${layout.dir}`);
  }
}

main().then(
  (code) => process.exit(code),
  (e: Error) => {
    process.stderr.write(`soak failed to run: ${e.stack ?? e.message}\n`);
    process.exit(2);
  },
);
