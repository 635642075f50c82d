import type { Command } from 'commander';
import { ExecutorClient } from '../../activities/executor-client.js';
import { fetchPolicyTasks, Policy } from '../../dev/standin/policy.js';
import { DEFAULT_STANDIN_PORT, STANDIN_MODEL, startStandin } from '../../dev/standin/server.js';
import { UsageError } from '../../entry/cli/errors.js';
import { intOption } from '../../entry/cli/options.js';

function share(name: string) {
  return (v: string): number => {
    const n = Number(v);
    if (!Number.isFinite(n) || n < 0 || n > 1)
      throw new UsageError(`${name} expects a share between 0 and 1, got ${v}`);
    return n;
  };
}

export function register(program: Command): void {
  program
    .command('standin-generator')
    .description(
      `run the stand-in generator: an OpenAI-compatible server (model ${STANDIN_MODEL}) that answers the synthesis ` +
        'prompts with rule-based edits of the real BFCL seed task; it replaces vLLM in tests and the demo only. ' +
        'Faults per request: header x-rods-fault: 5xx|429|timeout|malformed|reject (x-rods-fault-key + ' +
        'x-rods-fault-count: only the first N requests with that key). Runs until SIGINT/SIGTERM.',
    )
    .option('--host <host>', 'listen address', '127.0.0.1')
    .option('--port <n>', 'listen port (0: a free one)', intOption('--port', 0, 65535), DEFAULT_STANDIN_PORT)
    .option(
      '--seed <n>',
      'server seed: with the request it determines every answer',
      intOption('--seed', 0),
      0,
    )
    .option('--latency-ms <n>', 'delay before every answer', intOption('--latency-ms', 0), 0)
    .option('--fail-rate <r>', 'share of requests answered with HTTP 503', share('--fail-rate'), 0)
    .option(
      '--rate-limit-rate <r>',
      'share of requests answered with HTTP 429',
      share('--rate-limit-rate'),
      0,
    )
    .option(
      '--timeout-rate <r>',
      'share of requests left hanging until the client times out',
      share('--timeout-rate'),
      0,
    )
    .option(
      '--malformed-rate <r>',
      'share of requests answered with malformed JSON',
      share('--malformed-rate'),
      0,
    )
    .option(
      '--reject-rate <r>',
      'share of judge requests answered with a rejection',
      share('--reject-rate'),
      0,
    )
    .option(
      '--contradict-rate <r>',
      'share of judge answers whose verdict contradicts their own scores',
      share('--contradict-rate'),
      0,
    )
    .option(
      '--policy-correct <ids>',
      'known-answer policy: answer these BFCL task ids (comma-separated) with their ground truth as tool calls, ' +
        'every other task with text only; the tasks come from the executor (RODS_EXECUTOR_URL)',
    )
    .option(
      '--policy-correct-fraction <r>',
      'known-answer policy: also answer this share of all tasks right (drawn per id with --policy-seed)',
      share('--policy-correct-fraction'),
    )
    .option(
      '--policy-seed <n>',
      'seed of the --policy-correct-fraction draw',
      intOption('--policy-seed', 0),
      0,
    )
    .option('--quiet', 'do not log one line per request')
    .action(
      async (opts: {
        host: string;
        port: number;
        seed: number;
        latencyMs: number;
        failRate: number;
        rateLimitRate: number;
        timeoutRate: number;
        malformedRate: number;
        rejectRate: number;
        contradictRate: number;
        policyCorrect?: string;
        policyCorrectFraction?: number;
        policySeed: number;
        quiet?: boolean;
      }) => {
        let policy: Policy | undefined;
        if (opts.policyCorrect !== undefined || opts.policyCorrectFraction !== undefined) {
          const client = new ExecutorClient();
          const tasks = await fetchPolicyTasks((c, limit, offset) => client.seeds(c, limit, offset));
          try {
            policy = new Policy({
              tasks,
              correct: (opts.policyCorrect ?? '')
                .split(',')
                .map((s) => s.trim())
                .filter(Boolean),
              correctFraction: opts.policyCorrectFraction,
              seed: opts.policySeed,
            });
          } catch (e) {
            throw new UsageError((e as Error).message);
          }
          console.error(
            `known-answer policy over ${tasks.length} tasks: ${policy.correctIds().length} answered right ` +
              '(POST /v1/chat/completions, or /policy/<category>/v1/chat/completions to name the category)',
          );
        }
        const server = await startStandin({
          policy,
          host: opts.host,
          port: opts.port,
          seed: opts.seed,
          latencyMs: opts.latencyMs,
          failRate: opts.failRate,
          rateLimitRate: opts.rateLimitRate,
          timeoutRate: opts.timeoutRate,
          malformedRate: opts.malformedRate,
          rejectRate: opts.rejectRate,
          contradictRate: opts.contradictRate,
          log: !opts.quiet,
        });
        console.error(
          `stand-in generator (not an LLM; replaces vLLM in tests and the demo) listening on ${server.url} ` +
            `(model ${STANDIN_MODEL}, seed ${opts.seed}); give it to the worker as RODS_GENERATOR_BASE_URL`,
        );
        await new Promise<void>((resolve) => {
          const stop = () => resolve();
          process.once('SIGTERM', stop);
          process.once('SIGINT', stop);
        });
        await server.close();
        console.error(`stand-in generator stopped after ${server.stats.requests} request(s)`);
      },
    );
}
