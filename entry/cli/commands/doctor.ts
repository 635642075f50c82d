// `rods doctor`: proves each backing service works end to end with a real round trip
// (PostgreSQL write/read after migrations, Kafka produce/consume through a consumer group,
// a Temporal workflow executed by an in-process worker), and probes each generator endpoint
// with one structured request through the stages' client.

import { randomUUID } from 'node:crypto';
import { type Command, InvalidArgumentError } from 'commander';
import { loadGeneratorEndpoints } from '../../../activities/llm/endpoints.js';
import {
  DEFAULT_PROBE_TIMEOUT_MS,
  type GeneratorProbe,
  probeGenerator,
} from '../../../activities/llm/probe.js';
import { DEFAULT_SYNTHESIS_TIMEOUT_MS } from '../../../analysis/status/campaign-status.js';
import { diagnose, renderFindings } from '../../../analysis/status/diagnose.js';
import { workflowIds } from '../../../domain/ids.js';
import { loadEndpoints, shownEndpoints } from '../../../platform/config/endpoints.js';
import {
  ensureTopics,
  onTransientKafkaErrors,
  openKafka,
  TopicsMissingError,
  withAdmin,
} from '../../../platform/kafka/client.js';
import { kafkaBootstrap, loadKafkaSecurity } from '../../../platform/kafka/client-properties.js';
import { createPool } from '../../../platform/store/db.js';
import { settingsRoundTrip } from '../../../platform/store/events/audit.js';
import { migrate } from '../../../platform/store/migrate.js';
import { installWorkerRuntime, temporalClient } from '../../../platform/temporal/connect.js';
import { temporalConnectOptions } from '../../../platform/temporal/connect-options.js';
import { tlsRefusal, withTlsMeaning } from '../../../platform/util/tls-refusal.js';
import { doctorRoundTrip } from '../../../workflows/doctor.js';
import { describeUnreachable, unreachableService } from '../errors.js';
import { printJson } from '../output.js';
import { type StatusCliOptions, statusReport } from './campaign.js';

/**
 * One check. `ok` is false only for a failure (exit 1); `status` tells a warning apart (a
 * generator that answers, but not usably), `skipped` a check turned off by a flag.
 */
export interface Check {
  service: string;
  ok: boolean;
  status: 'ok' | 'warn' | 'fail' | 'skipped';
  ms: number;
  detail: string;
  /** The generator check's findings (endpoint, model, conformed, usage, reason). */
  generator?: Omit<GeneratorProbe, 'status' | 'ms' | 'detail'>;
}

async function timed(service: string, fn: () => Promise<string>): Promise<Check> {
  const t0 = performance.now();
  try {
    const detail = await fn();
    return { service, ok: true, status: 'ok', ms: Math.round(performance.now() - t0), detail };
  } catch (e) {
    const down = unreachableService(e);
    const detail = down ? describeUnreachable(down) : (e as Error).message;
    return { service, ok: false, status: 'fail', ms: Math.round(performance.now() - t0), detail };
  }
}

/**
 * The generator checks: one per endpoint the worker would have (RODS_GENERATOR_ENDPOINTS_FILE,
 * RODS_GENERATOR_BASE_URL, or the built-in default), probed at once. There is no judge endpoint of
 * its own: the judge is a model (generator.judgeModel) on the campaign's endpoint.
 */
export async function checkGenerators(
  opts: { model?: string; timeoutMs?: number },
  env: NodeJS.ProcessEnv = process.env,
): Promise<Check[]> {
  let endpoints: ReturnType<typeof loadGeneratorEndpoints>;
  try {
    endpoints = loadGeneratorEndpoints(env);
  } catch (e) {
    // The endpoint configuration's errors name files and fields, never a key.
    return [{ service: 'generator', ok: false, status: 'fail', ms: 0, detail: (e as Error).message }];
  }
  const configured = endpoints.source !== 'built-in default';
  return Promise.all(
    endpoints.names().map(async (name) => {
      const { status, ms, detail, ...generator } = await probeGenerator(endpoints.resolve(name), {
        ...opts,
        configured,
      });
      return { service: 'generator', ok: status !== 'fail', status, ms, detail, generator };
    }),
  );
}

const MARK: Record<Check['status'], string> = { ok: 'ok  ', warn: 'WARN', fail: 'FAIL', skipped: 'skip' };

/** One line of the human output. */
export function renderCheck(c: Check): string {
  return `${MARK[c.status]} ${c.service.padEnd(9)} ${String(c.ms).padStart(6)} ms  ${c.detail}`;
}

async function checkPostgres(): Promise<string> {
  const m = await migrate().catch((e: Error) => {
    // A refused certificate names the server and what to check; anything else stands as it is.
    if (!tlsRefusal(e)) throw e;
    const url = new URL(loadEndpoints().ownerDatabaseUrl ?? loadEndpoints().databaseUrl);
    const mode = url.searchParams.get('sslmode') ?? 'default';
    throw new Error(withTlsMeaning(`PostgreSQL at ${url.host} (sslmode=${mode}): ${e.message}`, e), {
      cause: e,
    });
  });
  const pool = createPool({ application: 'rods-doctor', max: 1 });
  try {
    const key = `doctor-${randomUUID()}`;
    if (!(await settingsRoundTrip(pool, key, { at: Date.now() })))
      throw new Error('row written but not read back');
    return `migrations ${m.applied.length ? `applied ${m.applied.join(', ')}` : 'up to date'}; row round trip ok`;
  } finally {
    await pool.end();
  }
}

/** The Kafka check of `rods doctor` (exported for its test on a secured broker). */
export async function checkKafka(messages: number): Promise<string> {
  // On a fresh broker the group coordinator loads for a while: say so once, as progress.
  const said = new Set<string>();
  onTransientKafkaErrors((note) => {
    if (said.has(note.what)) return;
    said.add(note.what);
    process.stderr.write(`kafka: ${note.what}; waiting (retried) ...\n`);
  });
  try {
    return await kafkaRoundTrip(messages);
  } finally {
    onTransientKafkaErrors(undefined);
  }
}

async function kafkaRoundTrip(messages: number): Promise<string> {
  // One attempt first: a bad CA, a wrong name or a refused password is named at once, not
  // after the client's retries.
  const security = loadKafkaSecurity();
  try {
    await withAdmin((a) => a.describeCluster(), { clientId: 'rods-doctor', retries: 0, quiet: true });
  } catch (e) {
    throw new Error(
      withTlsMeaning(
        `Kafka at ${kafkaBootstrap(process.env, security).join(',')} (${security.describe}): ${(e as Error).message}`,
        e,
      ),
      {
        cause: e,
      },
    );
  }
  const topic = `rods.doctor.${randomUUID().slice(0, 8)}`;
  const ensured = await withAdmin((a) => ensureTopics(a));
  try {
    await withAdmin((a) =>
      ensureTopics(a, [
        { name: topic, key: 'n', partitions: 3, replicationFactor: 1, config: {}, doc: 'doctor scratch' },
      ]),
    );
  } catch (e) {
    // A principal limited to rods' own topics (ACLs) may not make a scratch topic: the project's
    // topics are there and readable, which is what the processes need.
    if (e instanceof TopicsMissingError)
      return `project topics: ${ensured.existing.length + ensured.created.length} present; no round trip (this principal may not create the scratch topic ${topic}) (${security.describe})`;
    throw e;
  }
  const k = openKafka({ clientId: 'rods-doctor' });
  try {
    const p = await k.producer({ idempotent: true });
    await p.send(
      topic,
      Array.from({ length: messages }, (_, i) => ({ key: `k${i % 17}`, value: String(i) })),
    );
    await p.disconnect();
    const c = k.batchConsumer({ groupId: `rods-doctor-${randomUUID()}`, topics: [topic] });
    const seen = new Set<string>();
    try {
      await new Promise<void>((resolve, reject) => {
        const timer = setTimeout(
          () => reject(new Error(`only ${seen.size}/${messages} messages consumed in 30 s`)),
          30_000,
        );
        c.run(async (batch) => {
          for (const m of batch.records) seen.add(m.value!.toString());
          if (seen.size >= messages) {
            clearTimeout(timer);
            resolve();
          }
        }).catch(reject);
      });
    } finally {
      await c.disconnect();
    }
    return `${messages} messages produced and consumed once each; project topics: ${ensured.existing.length + ensured.created.length} (${security.describe})`;
  } finally {
    await withAdmin((a) => a.deleteTopics([topic]));
  }
}

async function checkTemporal(): Promise<string> {
  await installWorkerRuntime('WARN');
  // Loaded on demand: the worker runtime is installed (log level) before it is imported.
  const { createDoctorWorker } = await import('../../../activities/worker.js');
  const taskQueue = `rods-doctor-${randomUUID()}`;
  // The client first: its connection failure says what a TLS handshake met (the worker's native
  // connection reports only the transport's error).
  const { client, close } = await temporalClient();
  const { worker, close: closeWorker } = await createDoctorWorker(taskQueue).catch(async (e) => {
    await close();
    throw e;
  });
  try {
    const token = randomUUID();
    const result = await worker.runUntil(
      client.workflow.execute(doctorRoundTrip, {
        taskQueue,
        workflowId: workflowIds.doctor(token),
        args: [token],
      }),
    );
    if (result !== `echo:${token}`) throw new Error(`unexpected workflow result ${result}`);
    return `workflow → activity → result round trip ok (${temporalConnectOptions().describe})`;
  } finally {
    await close();
    await closeWorker();
  }
}

type DoctorCliOptions = {
  messages: number;
  json?: boolean;
  campaign?: string;
  generatorTimeout: number;
  generatorModel?: string;
  skipGenerator?: boolean;
} & StatusCliOptions;

export function register(program: Command): void {
  program
    .command('doctor')
    .description(
      'prove each backing service works with a real round trip (PostgreSQL, Kafka, Temporal) and probe the generator endpoints with one structured request; with --campaign, say what holds a campaign',
    )
    .option('--messages <n>', 'Kafka messages to round-trip', (v) => Number.parseInt(v, 10), 1000)
    .option(
      '--campaign <id>',
      'instead: say what holds this campaign and what to restart or check (exit 1 on a stall); see `rods campaign status`',
    )
    .option('--relay-name <name>', 'with --campaign: the relay whose lag to report', 'main')
    .option(
      '--aggregator-group <group>',
      "with --campaign: the aggregators' consumer group",
      'rods-aggregator',
    )
    .option(
      '--synthesis-timeout <s>',
      'with --campaign: report syntheses running longer than this many seconds',
      (v) => Number.parseInt(v, 10),
      DEFAULT_SYNTHESIS_TIMEOUT_MS / 1000,
    )
    .option(
      '--generator-timeout <s>',
      'time limit of the generator probe in seconds (a cold vLLM on a CPU takes 10 s and more)',
      (v) => {
        const s = Number(v);
        if (!(s > 0 && s <= 3600)) throw new InvalidArgumentError('a number of seconds in (0, 3600]');
        return s;
      },
      DEFAULT_PROBE_TIMEOUT_MS / 1000,
    )
    .option(
      '--generator-model <name>',
      'model the generator probe asks (default: the first the endpoint lists)',
    )
    .option('--skip-generator', 'do not probe the generator endpoints')
    .option('--json', 'JSON output')
    .action(async (opts: DoctorCliOptions) => {
      if (opts.campaign !== undefined) {
        const report = await statusReport(opts.campaign, opts);
        const findings = diagnose(report);
        if (opts.json) printJson({ campaignId: report.campaignId, findings, status: report });
        else console.log(renderFindings(report, findings));
        if (findings.some((f) => f.level === 'stall')) process.exitCode = 1;
        return;
      }
      const ep = loadEndpoints();
      const checks = [
        await timed('postgres', checkPostgres),
        await timed('kafka', () => checkKafka(opts.messages)),
        await timed('temporal', checkTemporal),
        ...(opts.skipGenerator
          ? [
              {
                service: 'generator',
                ok: true,
                status: 'skipped',
                ms: 0,
                detail: 'not probed (--skip-generator)',
              } satisfies Check,
            ]
          : await checkGenerators({
              ...(opts.generatorModel !== undefined ? { model: opts.generatorModel } : {}),
              timeoutMs: Math.round(opts.generatorTimeout * 1000),
            })),
      ];
      if (opts.json)
        printJson({
          // Neither role's password is printed (the owner's URL held it in clear before).
          endpoints: shownEndpoints(ep),
          checks,
        });
      else for (const c of checks) console.log(renderCheck(c));
      if (checks.some((c) => !c.ok)) process.exitCode = 1;
    });
}
