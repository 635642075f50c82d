// The demo campaign: the real pipeline (worker, aggregator, relay, gateway as processes), the
// stand-in generator in place of vLLM (or, with --generator vllm, the stack's vLLM), and the
// SIMULATED trainer talking to the gateway. Shows live progress and ends with a report folder:
// report.md, SVG charts and summary.json.
import { type ChildProcess, spawn } from 'node:child_process';
import { randomBytes, randomUUID } from 'node:crypto';
import { mkdirSync, mkdtempSync, openSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import net from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import cliProgress from 'cli-progress';
import type pg from 'pg';
import { evaluationSet } from '../../activities/eval-set.js';
import { ExecutorClient } from '../../activities/executor-client.js';
import { recordedManifest } from '../../analysis/manifest/manifest.js';
import { campaignStatus } from '../../analysis/status/campaign-status.js';
import type { StepPoint } from '../../analysis/status/dashboard.js';
import { diagnose, renderFindings } from '../../analysis/status/diagnose.js';
import {
  type GeneratorCost,
  generatorCost,
  type SynthesisFunnel,
  synthesisFunnel,
} from '../../analysis/status/funnel.js';
import { bounded } from '../../analysis/status/temporal.js';
import type { CandidateTask } from '../../domain/candidate.js';
import { poolContamination } from '../../domain/contamination.js';
import { workflowIds } from '../../domain/ids.js';
import { structuralCategory } from '../../domain/structure.js';
import { DEFAULT_PORT } from '../../entry/gateway/server.js';
import { pickServices, up } from '../../infra/stack/cli.js';
import { vllmService, vllmSettings } from '../../infra/stack/vllm.js';
import { DEFAULT_CONFIG } from '../../platform/config/campaign-config.js';
import { recordedPlan } from '../../platform/store/campaign-plans.js';
import { loadCampaign } from '../../platform/store/campaigns.js';
import { retryOnConnectionLoss } from '../../platform/store/db.js';
import {
  eventCountsByType,
  type StageFailureRow,
  stageFailures,
  synthesisLatencyRows,
} from '../../platform/store/events/campaign-reads.js';
import { rejectionsWithReason } from '../../platform/store/pool/funnel.js';
import { generatedMemberTasks } from '../../platform/store/pool/members.js';
import { poolComposition } from '../../platform/store/pool/view.js';
import { stepSummaries } from '../../platform/store/steps/view.js';
import { executeUpdateWithRetry, temporalClient } from '../../platform/temporal/connect.js';
import { freePort } from '../../platform/util/free-port.js';
import { SimulatedTrainer, type StepReport } from '../simulator/trainer.js';
import { STANDIN_MODEL } from '../standin/server.js';
import { barChart, lineChart } from './charts.js';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
/** How long the stopped campaign may take to let its last syntheses finish (vLLM on a CPU is slower). */
const COMPLETE_TIMEOUT_MS = { standin: 180_000, vllm: 900_000 };

/** The generators the demo runs with: the stand-in (dev/standin/) or the stack's vLLM. */
export const DEMO_GENERATORS = ['standin', 'vllm'] as const;
export type DemoGenerator = (typeof DEMO_GENERATORS)[number];

/** The campaign file of each generator: vLLM's asks for few, short answers (a CPU, a tiny model). */
const CAMPAIGN_FILE: Record<DemoGenerator, string> = {
  standin: 'dev/examples/campaign.standin.json',
  vllm: 'dev/examples/campaign.vllm.json',
};

interface DemoManifest {
  checkpoints: number;
  checkpointId: string;
  trainerStep: number;
  tasks: number;
  groups: number;
  groupsPosted: number;
  root: string;
  verified: boolean;
  lineageRoots: number;
}

export interface DemoOptions {
  steps: number;
  /** The simulated trainer saves and reports a checkpoint every this many steps (default 10). */
  checkpointEvery?: number;
  perCategory: number;
  out: string;
  json: boolean;
  /** Ablation switches for the campaign config (domain/ablation.ts); empty: the method as published. */
  ablation?: Record<string, unknown>;
  /** Leave the gateway running after the report (its dashboard), with a script to stop it. */
  keep?: boolean;
  /** The generator: the stand-in (default) or the stack's vLLM, brought up as `stack:up` does. */
  generator?: DemoGenerator;
}

/** Where the demo's generator answered, and under what model name. */
export interface DemoGeneratorInfo {
  kind: DemoGenerator;
  baseUrl: string;
  model: string;
}

/** The gateway's dashboard for the demo campaign, and the file holding a read-only token for it. */
export interface DemoDashboard {
  url: string;
  tokenFile: string;
  /** With --keep: the gateway's pid and the script that stops it. */
  gatewayPid?: number;
  stopScript?: string;
}

/** One step of the demo report: the dashboard's band counts and variances, and the loop's tallies. */
interface StepRow
  extends Pick<
    StepPoint,
    'step' | 'hard' | 'boundary' | 'mastered' | 'varHard' | 'varBoundary' | 'varMastered'
  > {
  ratio: number | null;
  poolVersion: number;
  active: number;
  generated: number;
  seeds: number;
  validated: number;
  rejected: number;
  injected: number;
  retired: number;
  selected: number;
  synthesisLatencyMs: number | null;
  zeroVarianceGroups: number;
  meanReward: number;
}

function startProcess(
  name: string,
  args: string[],
  logDir: string,
  env: NodeJS.ProcessEnv = {},
  detached = false,
  bin: 'rods' | 'rods-dev' = 'rods',
): ChildProcess {
  const fd = openSync(path.join(logDir, `${name}.log`), 'a');
  const child = spawn(process.execPath, [path.join(ROOT, `bin/${bin}.mjs`), ...args], {
    cwd: ROOT,
    stdio: ['ignore', fd, fd],
    env: { ...process.env, RODS_LOG_LEVEL: 'warn', ...env },
    // A kept gateway outlives the demo (and a Ctrl-C in its terminal).
    detached,
  });
  if (detached) child.unref();
  return child;
}

/** The gateway's port: 7500 (its default) when free, so a kept dashboard has a stable address. */
async function gatewayPortFor(): Promise<number> {
  const ok = await new Promise<boolean>((resolve) => {
    const s = net.createServer();
    s.once('error', () => resolve(false));
    s.listen(DEFAULT_PORT, '127.0.0.1', () => s.close(() => resolve(true)));
  });
  return ok ? DEFAULT_PORT : freePort();
}

async function waitHttp(url: string, what: string, child: ChildProcess, timeoutMs = 60_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    try {
      if ((await fetch(url)).ok) return;
    } catch {
      /* not up yet */
    }
    if (child.exitCode !== null) throw new Error(`${what} exited during start-up (see its log)`);
    if (Date.now() > deadline) throw new Error(`${what} did not answer ${url}`);
    await new Promise((r) => setTimeout(r, 250));
  }
}

async function stepRow(db: pg.Pool, campaignId: string, report: StepReport): Promise<StepRow> {
  const summaries = await stepSummaries(db, campaignId);
  const sum = summaries.find((x) => x.step === report.step)?.summary as
    | (Record<string, { tasks: number; meanVariance: number | null }> & {
        boundaryVarianceRatio: number | null;
      })
    | undefined;
  const plan = await recordedPlan<{ poolVersion: number; activeSize: number; generated: number }>(
    db,
    campaignId,
    report.step,
  );
  const c = await eventCountsByType(db, campaignId, [
    'CandidateValidated',
    'CandidateRejected',
    'TaskInjected',
    'TaskRetired',
    'SeedSelected',
  ]);
  // Every run of the demo's few steps, not the dashboard's newest 200.
  const latencies = (await synthesisLatencyRows(db, campaignId, 1_000_000)).map((r) => r.ms);
  const meanLatencyMs = latencies.length ? latencies.reduce((a, b) => a + b, 0) / latencies.length : null;
  const p = plan;
  return {
    step: report.step,
    hard: sum?.hard?.tasks ?? 0,
    boundary: sum?.boundary?.tasks ?? 0,
    mastered: sum?.mastered?.tasks ?? 0,
    varHard: sum?.hard?.meanVariance ?? null,
    varBoundary: sum?.boundary?.meanVariance ?? null,
    varMastered: sum?.mastered?.meanVariance ?? null,
    ratio: sum?.boundaryVarianceRatio ?? null,
    poolVersion: p?.poolVersion ?? report.poolVersion,
    active: p?.activeSize ?? report.groups,
    generated: p?.generated ?? 0,
    seeds: (p?.activeSize ?? 0) - (p?.generated ?? 0),
    validated: c.CandidateValidated ?? 0,
    rejected: c.CandidateRejected ?? 0,
    injected: c.TaskInjected ?? 0,
    retired: c.TaskRetired ?? 0,
    selected: c.SeedSelected ?? 0,
    synthesisLatencyMs: meanLatencyMs,
    zeroVarianceGroups: report.zeroVarianceGroups,
    meanReward: report.meanReward,
  };
}

/** How long the demo took to get going: from `npm run demo` (infra/demo.sh) to the first step sent and planned. */
export interface DemoTimings {
  setupSeconds: number;
  firstStepSeconds: number;
  stepsSeconds: number;
}

export async function runDemo(
  db: pg.Pool,
  opts: DemoOptions,
): Promise<{ out: string; summary: Record<string, unknown>; dashboard: DemoDashboard }> {
  const out = path.resolve(opts.out);
  const logDir = path.join(out, 'logs');
  mkdirSync(logDir, { recursive: true });
  // Scoped tokens (entry/gateway/auth.ts): the operator's admin token creates the campaign; the
  // simulated trainer's token may only post to and read that campaign.
  const token = randomBytes(16).toString('hex');
  const trainerToken = randomBytes(16).toString('hex');
  const campaignId = `demo-${new Date()
    .toISOString()
    .replace(/[^0-9]/g, '')
    .slice(0, 14)}`;
  const tokensDir = mkdtempSync(path.join(tmpdir(), 'rods-demo-'));
  const tokensFile = path.join(tokensDir, 'gateway-tokens');
  // The dashboard's token may read every campaign and change nothing; it stays in the report
  // folder (mode 0600), never in a URL the gateway sees (the page takes it from the fragment).
  const readToken = randomBytes(16).toString('hex');
  const tokenFile = path.join(out, 'dashboard.token');
  writeFileSync(tokenFile, `${readToken}\n`, { mode: 0o600 });
  writeFileSync(tokensFile, `${token} admin\n${trainerToken} campaign:${campaignId}\n${readToken} read\n`, {
    mode: 0o600,
  });
  const standinPort = await freePort();
  const gatewayPort = await gatewayPortFor();
  // With RODS_GATEWAY_TLS_CERT (the secured stack's env.sh) the gateway serves HTTPS for the
  // names its certificate carries; Node's fetch trusts the CA of NODE_EXTRA_CA_CERTS.
  const gw = process.env.RODS_GATEWAY_TLS_CERT
    ? `https://localhost:${gatewayPort}`
    : `http://127.0.0.1:${gatewayPort}`;
  const dashboard: DemoDashboard = {
    url: `${gw}/dashboard/#campaign=${campaignId}`,
    tokenFile,
  };
  let keptGateway: ChildProcess | undefined;
  const taskQueue = `rods-demo-${randomUUID().slice(0, 8)}`;
  const kind = opts.generator ?? 'standin';
  const vllm = kind === 'vllm' ? vllmSettings() : undefined;
  const generator: DemoGeneratorInfo = vllm
    ? { kind, baseUrl: vllmService().endpoint, model: vllm.servedName }
    : { kind, baseUrl: `http://127.0.0.1:${standinPort}/v1`, model: STANDIN_MODEL };
  const env = {
    RODS_TASK_QUEUE: taskQueue,
    RODS_GATEWAY_TOKENS_FILE: tokensFile,
    RODS_SINK_DIR: path.join(out, 'pool-sink'),
    // The generator is the worker's `default` endpoint; the campaign only names it.
    RODS_GENERATOR_BASE_URL: generator.baseUrl,
    ...(vllm?.apiKey ? { RODS_GENERATOR_API_KEY: vllm.apiKey } : {}),
  };
  const children: ChildProcess[] = [];
  const log = (m: string) => {
    if (!opts.json) process.stderr.write(`${m}\n`);
  };
  // Since `npm run demo` began (infra/demo.sh sets it), else since this process began.
  const began = Number(process.env.RODS_DEMO_STARTED_AT_MS) || Date.now() - process.uptime() * 1000;
  const timings: DemoTimings = { setupSeconds: 0, firstStepSeconds: 0, stepsSeconds: 0 };
  try {
    if (vllm) {
      // As `npm run stack:up -- --services vllm`: reused when it answers, else started (its log
      // is .stack/logs/vllm.log).
      log(`bringing up the stack's vLLM (${generator.model} on ${generator.baseUrl}) ...`);
      // up() reports on stdout, which --json keeps for the summary alone.
      const say = console.log;
      console.log = (...a: unknown[]) => console.error(...a);
      try {
        await up(pickServices('vllm'));
      } finally {
        console.log = say;
      }
    }
    log(
      `starting ${vllm ? '' : 'the stand-in generator (in place of vLLM), '}worker, aggregator, relay and gateway ...`,
    );
    const standin = vllm
      ? undefined
      : startProcess(
          'standin-generator',
          ['standin-generator', '--port', String(standinPort), '--seed', '1', '--quiet'],
          logDir,
          env,
          false,
          'rods-dev',
        );
    if (standin) children.push(standin);
    children.push(startProcess('worker', ['worker', '--task-queue', taskQueue], logDir, env));
    children.push(startProcess('aggregator', ['aggregator', '--session-timeout-ms', '6000'], logDir, env));
    children.push(startProcess('relay', ['relay', '--name', 'demo'], logDir, env));
    const gateway = startProcess(
      'gateway',
      ['gateway', '--port', String(gatewayPort), '--task-queue', taskQueue, '--relay-name', 'demo'],
      logDir,
      env,
      opts.keep,
    );
    if (opts.keep) keptGateway = gateway;
    else children.push(gateway);
    if (standin) await waitHttp(`${generator.baseUrl}/models`, 'stand-in generator', standin);
    await waitHttp(`${gw}/healthz`, 'gateway', gateway);

    const example = JSON.parse(readFileSync(path.join(ROOT, CAMPAIGN_FILE[kind]), 'utf8')) as Record<
      string,
      unknown
    >;
    const { campaignId: _c, name: _n, ...config } = example;
    config.seeds = { perCategory: opts.perCategory };
    // Generator and judge: the model the endpoint serves (RODS_VLLM_MODEL may name another).
    config.generator = {
      ...(config.generator as object),
      model: generator.model,
      judgeModel: generator.model,
    };
    if (opts.ablation && Object.keys(opts.ablation).length > 0)
      (config as { ablation?: unknown }).ablation = opts.ablation;
    const created = await fetch(`${gw}/v1/campaigns`, {
      method: 'POST',
      headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
      body: JSON.stringify({
        campaignId,
        name: `demo campaign (${vllm ? `vLLM generator ${generator.model}` : 'stand-in generator'}, simulated trainer)`,
        config,
      }),
    });
    if (created.status !== 201)
      throw new Error(`creating the campaign failed: ${created.status} ${await created.text()}`);
    log(`campaign ${campaignId}: seeding ${opts.perCategory * 4} BFCL tasks ...`);
    log(dashboardHint(dashboard));

    const trainer = new SimulatedTrainer({ gatewayUrl: gw, token: trainerToken, campaignId });
    // Wait until the pool is seeded before the first step.
    for (let i = 0; i < 600 && (await trainer.fetchPool()).length === 0; i++)
      await new Promise((r) => setTimeout(r, 200));

    const bar = opts.json
      ? undefined
      : new cliProgress.SingleBar(
          {
            format:
              'step {value}/{total} {bar} | bands h/b/m {bands} | pool {pool} v{version} | cand +{validated}/-{rejected} | inj {injected} ret {retired} | synth {latency}',
            stream: process.stderr,
            hideCursor: true,
          },
          cliProgress.Presets.shades_classic,
        );
    bar?.start(opts.steps, 0, {
      bands: '-',
      pool: 0,
      version: 0,
      validated: 0,
      rejected: 0,
      injected: 0,
      retired: 0,
      latency: '-',
    });
    const rows: StepRow[] = [];
    const t0 = Date.now();
    // Setup: install, stack, doctor, the processes and the seeded pool, until the first step is sent.
    timings.setupSeconds = Number(((t0 - began) / 1000).toFixed(1));
    // The trainer saves a checkpoint every checkpointEvery steps and reports it (rods manifest).
    const checkpoints: { checkpointId: string; step: number; groupsPosted: number }[] = [];
    let groupsPosted = 0;
    for (let step = 1; step <= opts.steps; step++) {
      const rep = await trainer.step(step);
      groupsPosted += rep.groups;
      await trainer.waitPlanned(step);
      if (step === 1) timings.firstStepSeconds = Number(((Date.now() - began) / 1000).toFixed(1));
      if (step % (opts.checkpointEvery ?? 10) === 0)
        checkpoints.push({ checkpointId: (await trainer.checkpoint(step)).checkpointId, step, groupsPosted });
      // A database restart mid-demo is waited out, like the trainer's requests (it retries them).
      const row = await retryOnConnectionLoss(db, () => stepRow(db, campaignId, rep));
      rows.push(row);
      bar?.update(step, {
        bands: `${row.hard}/${row.boundary}/${row.mastered}`,
        pool: row.active,
        version: row.poolVersion,
        validated: row.validated,
        rejected: row.rejected,
        injected: row.injected,
        retired: row.retired,
        latency: row.synthesisLatencyMs === null ? '-' : `${(row.synthesisLatencyMs / 1000).toFixed(1)}s`,
      });
    }
    bar?.stop();
    const seconds = (Date.now() - t0) / 1000;
    timings.stepsSeconds = Number(seconds.toFixed(1));
    log(
      `setup took ${timings.setupSeconds} s (install, stack, doctor, processes, seeding); the first training step closed and was planned ${timings.firstStepSeconds} s after the demo began; ${opts.steps} steps in ${timings.stepsSeconds} s`,
    );

    // Stop the campaign and wait until its workflow completes: it lets the running syntheses
    // finish and report, which needs the worker, so the processes stop only after that.
    const { client, close } = await temporalClient();
    try {
      const handle = client.workflow.getHandle(workflowIds.campaign(campaignId));
      await executeUpdateWithRetry(handle as never, 'stop', [{ reason: 'demo over' }]);
      log(`campaign ${campaignId}: stopped; waiting for its running syntheses to finish ...`);
      // What the syntheses have come to, every 10 s while they finish (minutes with vLLM).
      const progress = setInterval(() => {
        synthesisProgress(db, campaignId)
          .then((p) => log(`  ${p}`))
          .catch(() => {});
      }, 10_000);
      try {
        await bounded('the campaign workflow', COMPLETE_TIMEOUT_MS[kind], () => handle.result());
      } catch (e) {
        const r = await campaignStatus({ db, temporal: client }, campaignId, { deadLetters: false });
        throw new Error(
          `the campaign workflow did not complete (${(e as Error).message}):\n${r ? renderFindings(r, diagnose(r)) : ''}`,
        );
      } finally {
        clearInterval(progress);
      }
    } finally {
      await close();
    }
    const byDepth = new Map<number, number>();
    for (const r of await poolComposition(db, campaignId))
      byDepth.set(r.depth, (byDepth.get(r.depth) ?? 0) + r.active + r.retired + r.pruned);
    const depths = [...byDepth].sort(([a], [b]) => a - b).map(([depth, n]) => ({ depth, n }));
    const funnel = await synthesisFunnel(db, campaignId);
    // Every generated task's category against the one its structure gives it (domain/structure.ts).
    const generated = (await generatedMemberTasks(db, campaignId)).map((t) => ({
      ...t,
      origin: 'generated',
      task: (typeof t.task === 'string' ? JSON.parse(t.task) : t.task) as CandidateTask,
    }));
    const categoryMismatches = generated
      .filter((t) => structuralCategory(t.task) !== t.category)
      .map((t) => t.taskId);
    const categories = { generated: generated.length, mismatches: categoryMismatches };
    const cost = await generatorCost(db, campaignId, funnel);
    const failures = await stageFailures(db, campaignId);
    // Every generated task against the evaluation set (domain/contamination.ts), as `rods contamination` does.
    const campaign = await loadCampaign(db, campaignId);
    const rule = (campaign?.config ?? DEFAULT_CONFIG).synthesis.contamination;
    const evalSet = await evaluationSet(
      new ExecutorClient(),
      campaign?.config.seeds?.perCategory ?? 100,
      rule.ngram,
    );
    const c = poolContamination(generated, evalSet, rule);
    const contamination = {
      evaluationTasks: evalSet.length,
      compared: c.compared,
      contaminated: c.contaminated,
      maxTextOverlap: c.maxTextOverlap,
      rejected: await rejectionsWithReason(db, campaignId, 'eval-contamination'),
      nearest: c.nearest.slice(0, 3),
    };
    // The last checkpoint's manifest, recomputed from the log and checked against its recorded root.
    const lastCheckpoint = checkpoints.at(-1);
    let manifest: DemoManifest | null = null;
    if (lastCheckpoint) {
      const { event, manifest: m } = await recordedManifest(db, campaignId, lastCheckpoint.checkpointId);
      manifest = {
        checkpoints: checkpoints.length,
        checkpointId: lastCheckpoint.checkpointId,
        trainerStep: m.trainerStep,
        tasks: m.entries.length,
        groups: m.groups,
        groupsPosted: lastCheckpoint.groupsPosted,
        root: m.root,
        verified: m.root === event.payload.manifestRoot,
        lineageRoots: new Set(m.entries.map((e) => e.lineageRoot)).size,
      };
    }
    const summary = writeReport(
      out,
      campaignId,
      rows,
      depths,
      seconds,
      funnel,
      opts.ablation ?? {},
      categories,
      cost,
      contamination,
      manifest,
      timings,
      generator,
      failures,
    );
    if (keptGateway?.pid !== undefined && keptGateway.exitCode === null) {
      dashboard.gatewayPid = keptGateway.pid;
      dashboard.stopScript = path.join(out, 'stop-gateway.sh');
      writeFileSync(
        dashboard.stopScript,
        `#!/bin/sh\n# Stops the gateway \`npm run dev -- demo --keep\` left running (pid ${keptGateway.pid}), if it is still that process.\n` +
          `if tr '\\0' ' ' < /proc/${keptGateway.pid}/cmdline 2>/dev/null | grep -q 'gateway --port ${gatewayPort}'; then kill ${keptGateway.pid}; fi\n`,
        { mode: 0o755 },
      );
      keptGateway = undefined;
    }
    return { out, summary, dashboard };
  } finally {
    for (const c of children) if (c.exitCode === null) c.kill('SIGTERM');
    // A run that failed stops its gateway even with --keep.
    if (keptGateway?.exitCode === null) keptGateway.kill('SIGTERM');
    rmSync(tokensDir, { recursive: true, force: true });
  }
}

/** One line on the syntheses so far: selected, ended by outcome, and the generator's tokens. */
async function synthesisProgress(db: pg.Pool, campaignId: string): Promise<string> {
  const f = await synthesisFunnel(db, campaignId);
  const cost = await generatorCost(db, campaignId, f);
  const failed = cost.byStage.reduce((a, s) => a + s.failed, 0);
  return `syntheses: ${f.selected} selected, ${f.validated} validated, ${f.rejected} rejected; ${failed} model stages failed; generator tokens ${cost.tokens.total}`;
}

/** Where the dashboard is and how to open it with the token. */
export function dashboardHint(d: DemoDashboard): string {
  return (
    `dashboard: ${d.url}\n` +
    `  token (read-only): ${d.tokenFile}; paste it into the page, or open\n` +
    `  "${d.url.replace('#campaign=', '#token=$(cat ' + d.tokenFile + ')&campaign=')}"`
  );
}

/** The refused model stages by reason, the most frequent first (at most 10 rows). */
function failureTable(failures: StageFailureRow[]): string {
  if (failures.length === 0) return 'No model stage had every answer refused.';
  const cell = (t: string) => t.replace(/\|/g, '\\|').replace(/\s+/g, ' ');
  const rows = failures
    .slice(0, 10)
    .map(
      (f) =>
        `| ${f.stage} | ${f.model ?? '-'} | ${f.runs} | ${f.promptTokens} / ${f.completionTokens} | ${cell(f.reason)} |`,
    );
  const more =
    failures.length > 10 ? `\n\n${failures.length - 10} more reasons in summary.json (stageFailures).` : '';
  return `Model stages whose every answer was refused (StageFailed; the run is then rejected as generator-output-invalid), by reason:

| stage | model | runs | tokens (prompt / completion) | reason |
| --- | --- | --- | --- | --- |
${rows.join('\n')}${more}`;
}

function mean(xs: (number | null)[]): number | null {
  const v = xs.filter((x): x is number => x !== null);
  return v.length ? v.reduce((a, b) => a + b, 0) / v.length : null;
}

function writeReport(
  out: string,
  campaignId: string,
  rows: StepRow[],
  depths: { depth: number; n: number }[],
  seconds: number,
  funnel: SynthesisFunnel,
  ablation: Record<string, unknown>,
  categories: { generated: number; mismatches: string[] },
  cost: GeneratorCost,
  contamination: {
    evaluationTasks: number;
    compared: number;
    contaminated: number;
    maxTextOverlap: number;
    rejected: number;
  },
  manifest: DemoManifest | null,
  timings: DemoTimings,
  generator: DemoGeneratorInfo,
  failures: StageFailureRow[],
) {
  const varB = mean(rows.map((r) => r.varBoundary));
  const varOther = mean(rows.flatMap((r) => [r.varHard, r.varMastered]));
  const ratio = varB !== null && varOther ? varB / varOther : null;
  const last = rows[rows.length - 1];
  // What the refused answers cost (StageFailed): in the ledger's totals, and apart here.
  const failed = failures.reduce(
    (a, f) => ({
      runs: a.runs + f.runs,
      promptTokens: a.promptTokens + f.promptTokens,
      completionTokens: a.completionTokens + f.completionTokens,
    }),
    { runs: 0, promptTokens: 0, completionTokens: 0 },
  );
  const summary = {
    campaignId,
    generator,
    ablation,
    steps: rows.length,
    seconds: Number(seconds.toFixed(1)),
    timings,
    bandCountsPerStep: rows.map((r) => ({
      step: r.step,
      hard: r.hard,
      boundary: r.boundary,
      mastered: r.mastered,
    })),
    meanVarianceByBand: {
      hard: mean(rows.map((r) => r.varHard)),
      boundary: varB,
      mastered: mean(rows.map((r) => r.varMastered)),
    },
    boundaryToOtherVarianceRatio: ratio,
    varianceRatioPerStep: rows.map((r) => ({ step: r.step, ratio: r.ratio })),
    poolPerStep: rows.map((r) => ({
      step: r.step,
      version: r.poolVersion,
      active: r.active,
      seeds: r.seeds,
      generated: r.generated,
    })),
    candidates: {
      validated: last?.validated ?? 0,
      rejected: last?.rejected ?? 0,
      injected: last?.injected ?? 0,
    },
    retired: last?.retired ?? 0,
    seedsSelected: last?.selected ?? 0,
    synthesisFunnel: funnel,
    // Generated tasks (ever in the pool) and those whose category is not what their structure gives.
    generatedCategories: categories,
    // The generator's tokens (the usage the endpoint reported): in all, by stage, per outcome.
    generatorCost: cost,
    // Model stages whose every answer was refused (StageFailed), by stage, model and reason, and
    // what they cost in all (counted in generatorCost too).
    stageFailures: failures,
    failedStages: failed,
    // Generated tasks (ever in the pool) against the evaluation set; candidates the gate rejected.
    contamination,
    // The last checkpoint's manifest (rods manifest): its tasks, groups and verified Merkle root.
    manifest,
    meanSynthesisLatencyMs: last?.synthesisLatencyMs ?? null,
    lineageDepth: depths,
    zeroVarianceShare: rows.map((r) => ({
      step: r.step,
      share: r.active ? r.zeroVarianceGroups / r.active : 0,
    })),
  };
  writeFileSync(path.join(out, 'summary.json'), `${JSON.stringify(summary, null, 2)}\n`);
  const steps = rows.map((r) => r.step);
  type Count = 'hard' | 'boundary' | 'mastered' | 'seeds' | 'generated';
  const series = (name: string, count: Count) => ({ name, values: rows.map((r) => r[count]) });
  writeFileSync(
    path.join(out, 'bands.svg'),
    lineChart('Tasks per band at each step', 'training step', 'tasks', [
      series('hard', 'hard'),
      series('boundary', 'boundary'),
      series('mastered', 'mastered'),
    ]),
  );
  writeFileSync(
    path.join(out, 'variance.svg'),
    barChart(
      'Mean reward variance by band',
      'band',
      'mean group variance',
      [
        { label: 'hard', value: summary.meanVarianceByBand.hard ?? 0 },
        { label: 'boundary', value: varB ?? 0 },
        { label: 'mastered', value: summary.meanVarianceByBand.mastered ?? 0 },
      ],
      ratio === null ? undefined : `boundary/other = ${ratio.toFixed(2)}x`,
    ),
  );
  writeFileSync(
    path.join(out, 'pool.svg'),
    lineChart('Pool composition by origin', 'training step', 'tasks', [
      series('human seeds', 'seeds'),
      series('generated', 'generated'),
    ]),
  );
  writeFileSync(
    path.join(out, 'lineage.svg'),
    barChart(
      'Lineage depth of pool tasks',
      'generations from the human seed',
      'tasks',
      depths.map((d) => ({ label: String(d.depth), value: d.n })),
    ),
  );
  const md = `# Demo campaign ${campaignId}

A SIMULATED GRPO trainer (simulator/model.ts) trained for ${rows.length} steps on the BFCL
multi-turn seeds through the gateway; ${
    generator.kind === 'vllm'
      ? `the generator was vLLM serving \`${generator.model}\` at ${generator.baseUrl} (the stack's tiny random model unless RODS_VLLM_MODEL names another: its answers are noise, so candidates are expected to be rejected; see why below)`
      : 'the generator was the stand-in (standin/), not an LLM'
  }. The figures show the pipeline's behaviour on simulated dynamics, not model quality.

| figure | value |
| --- | --- |
| steps | ${rows.length} (${summary.seconds} s) |
| setup, first step | ${timings.setupSeconds} s until the first step was sent; its close and plan ${timings.firstStepSeconds} s after the demo began |
| ablation | ${
    Object.keys(ablation).length
      ? Object.entries(ablation)
          .map(([k, v]) => `${k}: ${v}`)
          .join(', ')
      : 'none (the method as published)'
  } |
| seeds selected | ${summary.seedsSelected} |
| candidates validated / rejected | ${summary.candidates.validated} / ${summary.candidates.rejected} |
| tasks injected / retired | ${summary.candidates.injected} / ${summary.retired} |
| pool at the end | ${last?.active ?? 0} tasks (${last?.seeds ?? 0} seeds, ${last?.generated ?? 0} generated), version ${last?.poolVersion ?? 0} |
| mean reward variance, boundary vs other bands | ${varB?.toFixed(4) ?? '-'} vs ${varOther?.toFixed(4) ?? '-'} (ratio ${ratio?.toFixed(2) ?? '-'}; the paper reports 2.0-2.2x) |
| mean synthesis latency | ${summary.meanSynthesisLatencyMs === null ? '-' : `${(summary.meanSynthesisLatencyMs / 1000).toFixed(1)} s`} |

The synthesis funnel (runs reaching each stage; candidates by outcome):

| selected | planned | executed | repaired | rewritten | judged | augmented | validated | rejected | injected |
| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |
| ${funnel.selected} | ${funnel.planned} | ${funnel.executed} | ${funnel.repaired} | ${funnel.rewritten} | ${funnel.judged} | ${funnel.augmented} | ${funnel.validated} | ${funnel.rejected} | ${funnel.injected} |

Generator tokens (${generator.kind === 'vllm' ? "vLLM's usage" : "the stand-in's usage, as vLLM reports it"}, model \`${generator.model}\`): ${cost.tokens.total} in all (${cost.tokens.prompt} prompt, ${cost.tokens.completion} completion); per selected run ${cost.perSelected ?? '-'}, per validated candidate ${cost.perValidated ?? '-'}, per injected task ${cost.perInjected ?? '-'}, per useful task ${cost.perUseful ?? `- (none useful: ${cost.tokens.total} tokens for no useful task)`} (${cost.useful} injected tasks observed in the boundary band within \`pool.usefulWithinSteps\` of their injection). Of them, refused answers (${failed.runs} model stages whose every answer was refused, StageFailed): ${failed.promptTokens + failed.completionTokens} (${failed.promptTokens} prompt, ${failed.completionTokens} completion).

Evaluation-set contamination (\`rods contamination\`): ${contamination.compared} generated tasks compared with ${contamination.evaluationTasks} evaluation tasks (the BFCL multi-turn tasks past the seeds); ${contamination.contaminated} contaminated, largest shared n-gram share ${contamination.maxTextOverlap.toFixed(3)}; ${contamination.rejected} candidates rejected by the gate.

Checkpoint manifest (\`rods manifest\`): ${
    manifest
      ? `${manifest.checkpoints} checkpoints reported; the last, ${manifest.checkpointId} at step ${manifest.trainerStep}, was trained on ${manifest.tasks} tasks (from ${manifest.lineageRoots} human seeds) in ${manifest.groups} reward groups (the trainer posted ${manifest.groupsPosted}); Merkle root ${manifest.root} ${manifest.verified ? 'equals the recorded one' : 'DIFFERS from the recorded one'}.`
      : 'none (fewer steps than --checkpoint-every).'
  }

Rejected by reason: ${
    Object.entries(funnel.rejectedByReason)
      .sort((a, b) => b[1] - a[1])
      .map(([k, n]) => `${k} ${n}`)
      .join(', ') || 'none'
  }.

${failureTable(failures)}

![bands](bands.svg)
![variance](variance.svg)
![pool](pool.svg)
![lineage](lineage.svg)

Steps: ${steps.join(', ')}. Per-step figures are in summary.json.
`;
  writeFileSync(path.join(out, 'report.md'), md);
  return summary;
}
