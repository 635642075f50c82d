// What securing the stack costs a live campaign: one campaign's steps of `tasks` groups x 16
// rewards through the gateway (the campaigns bench's lone campaign, `--alone-only`), on the
// plaintext stack (the shared one) and on a secured stack of the bench's own in the same run
// (infra/stack/secure.ts: Kafka SASL_SSL with SCRAM and ACLs, PostgreSQL verify-full, Temporal
// mutual TLS through nginx, the gateway over HTTPS). Each side runs in its own process, the
// aggregator as its own process too. Figures: a step's close latency (POST start to the step
// closed by the aggregator) and the gateway's ingest time (POST to its 202), p50 and p99.
// ratio = secured p50 close latency / plaintext p50 close latency; ingest_ratio likewise.
import { execFile } from 'node:child_process';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { startPrivateSecureStack } from '../../test/support/secure-stack.js';
import type { BenchResult } from './result.js';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const execFileP = promisify(execFile);

interface Alone {
  gateway: string;
  alone: { p50_close_ms: number; p99_close_ms: number; p50_post_ms: number; p99_post_ms: number };
}

export default async function securedBench(opts: Record<string, string | boolean>): Promise<BenchResult> {
  const tasks = String(opts.tasks ?? 800);
  const steps = String(opts.steps ?? 12);
  const stepSeconds = String(opts['step-seconds'] ?? 4);
  const log = (m: string) => opts.json || process.stderr.write(`${m}\n`);
  const side = async (name: string, env: NodeJS.ProcessEnv): Promise<Alone> => {
    log(`${name}: ${steps} steps of ${tasks} tasks, one every ${stepSeconds} s ...`);
    const r = await execFileP(
      process.execPath,
      [
        path.join(ROOT, 'node_modules/tsx/dist/cli.mjs'),
        path.join(ROOT, 'dev/bench/run.ts'),
        'campaigns',
        '--json',
        '--alone-only',
        ...['--tasks', tasks, '--steps', steps, '--step-seconds', stepSeconds],
      ],
      { cwd: ROOT, env, maxBuffer: 16 << 20 },
    );
    // The result is the last line (the worker runtime's log may come before it).
    const last = r.stdout.trim().split('\n').at(-1) ?? '';
    return JSON.parse(last) as Alone;
  };
  log('starting a secured stack of the bench’s own ...');
  const stack = await startPrivateSecureStack();
  try {
    const plain = await side('plaintext stack', process.env);
    const secured = await side('secured stack', stack.env);
    if (secured.gateway !== 'https') throw new Error('the secured side did not serve HTTPS');
    const ratio = (a: number, b: number) => Number((a / b).toFixed(3));
    return {
      tasks: Number(tasks),
      steps: Number(steps),
      step_seconds: Number(stepSeconds),
      plaintext: plain.alone,
      secured: secured.alone,
      ingest_ratio: ratio(secured.alone.p50_post_ms, plain.alone.p50_post_ms),
      p99_ratio: ratio(secured.alone.p99_close_ms, plain.alone.p99_close_ms),
      ratio: ratio(secured.alone.p50_close_ms, plain.alone.p50_close_ms),
    };
  } finally {
    await stack.stop();
  }
}
