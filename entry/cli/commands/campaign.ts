// `rods campaign start|status|pause|resume|stop|reconfigure` and `rods pool`.
import { readFileSync } from 'node:fs';
import { WorkflowNotFoundError, WorkflowUpdateFailedError } from '@temporalio/client';
import type { Command } from 'commander';
import { loadGeneratorEndpoints } from '../../../activities/llm/endpoints.js';
import {
  type CampaignStatusReport,
  campaignStatus,
  DEFAULT_SYNTHESIS_TIMEOUT_MS,
} from '../../../analysis/status/campaign-status.js';
import { diagnose, renderFindings } from '../../../analysis/status/diagnose.js';
import { bounded } from '../../../analysis/status/temporal.js';
import { campaignConfigSizeError, redactCampaignConfig } from '../../../domain/campaign-config.js';
import type { CampaignStatus } from '../../../domain/campaign-state.js';
import { workflowIds } from '../../../domain/ids.js';
import { loadCampaign } from '../../../platform/store/campaigns.js';
import { createPool, type Pool } from '../../../platform/store/db.js';
import { migrate } from '../../../platform/store/migrate.js';
import { type PoolView, poolView } from '../../../platform/store/pool/view.js';
import { executeUpdateWithRetry, taskQueue, temporalClient } from '../../../platform/temporal/connect.js';
import {
  CampaignExistsError,
  checkNewCampaignConfig,
  startCampaign,
} from '../../../workflows/start-campaign.js';
import { UsageError } from '../errors.js';
import { positiveInt } from '../options.js';
import { printJson } from '../output.js';

/** The operator's endpoint names, when the CLI has the endpoints file (else no check here). */
const generatorEndpointNames = () =>
  process.env.RODS_GENERATOR_ENDPOINTS_FILE ? loadGeneratorEndpoints().names() : undefined;

function readConfigFile(file: string): { campaignId?: string; name?: string; config: unknown } {
  let raw: unknown;
  try {
    raw = JSON.parse(readFileSync(file, 'utf8'));
  } catch (e) {
    throw new UsageError(`cannot read config ${file}: ${(e as Error).message}`);
  }
  if (typeof raw !== 'object' || raw === null || Array.isArray(raw))
    throw new UsageError(`${file}: expected a JSON object`);
  const { campaignId, name, ...config } = raw as Record<string, unknown>;
  const tooLarge = campaignConfigSizeError(config);
  if (tooLarge) throw new UsageError(`${file}: ${tooLarge}`);
  // Refused before anything connects, with the operator's endpoints file when there is one
  // (startCampaign runs the same checks).
  try {
    checkNewCampaignConfig(config, generatorEndpointNames());
  } catch (e) {
    throw new UsageError(`${file}: ${(e as Error).message}`);
  }
  return {
    campaignId: typeof campaignId === 'string' ? campaignId : undefined,
    name: typeof name === 'string' ? name : undefined,
    config,
  };
}

/** Whether a workflow with this id exists (running or closed, within retention). */
async function withCampaign<T>(campaignId: string, fn: (pool: Pool) => Promise<T>): Promise<T> {
  const pool = createPool({ application: 'rods-cli', max: 2 });
  try {
    if (!(await loadCampaign(pool, campaignId)))
      throw new UsageError(`unknown campaign ${JSON.stringify(campaignId)}`);
    return await fn(pool);
  } finally {
    await pool.end();
  }
}

/** Sends a control update (pause, resume, stop, reconfigure) and prints the status it answers. */
async function control(campaignId: string, name: string, args: unknown[], json?: boolean): Promise<void> {
  await withCampaign(campaignId, async () => {
    const s = await update(campaignId, name, args);
    if (json) printJson(s);
    else printStatus(s);
  });
}

async function update(campaignId: string, name: string, args: unknown[] = []): Promise<CampaignStatus> {
  const { client, close } = await temporalClient();
  try {
    const handle = client.workflow.getHandle(workflowIds.campaign(campaignId));
    const s = await executeUpdateWithRetry<CampaignStatus>(
      handle as never,
      name,
      args.length ? (args as [unknown]) : undefined,
    );
    // A campaign recorded before endpoints existed may carry a generator URL or key: never shown.
    return { ...s, config: redactCampaignConfig(s.config) };
  } catch (e) {
    if (e instanceof WorkflowUpdateFailedError) {
      const cause = (e.cause as Error | undefined)?.message ?? e.message;
      throw new UsageError(`${name} refused: ${cause}`);
    }
    if (e instanceof WorkflowNotFoundError)
      throw new UsageError(`campaign ${campaignId} has no running workflow`);
    throw e;
  } finally {
    await close();
  }
}

function printStatus(s: CampaignStatus & { pool?: PoolView }): void {
  console.log(`campaign ${s.campaignId}: ${s.status}, step ${s.step}, pool version ${s.poolVersion}`);
  console.log(`  running syntheses: ${Object.keys(s.running).length}`);
  console.log(
    `  totals: selected ${s.totals.selected}, validated ${s.totals.validated}, rejected ${s.totals.rejected}, injected ${s.totals.injected}, retired ${s.totals.retired}, pruned ${s.totals.pruned}`,
  );
  if (s.pool) {
    console.log(
      `  pool: ${s.pool.active} active ${JSON.stringify(s.pool.byOrigin)} by band ${JSON.stringify(s.pool.byBand)}, queue ${s.pool.queueLength}`,
    );
  }
}

export interface StatusCliOptions {
  relayName: string;
  aggregatorGroup: string;
  synthesisTimeout: number;
}

/** The status report of a registered campaign (UsageError otherwise); never waits on a worker. */
export async function statusReport(
  campaignId: string,
  opts: StatusCliOptions,
): Promise<CampaignStatusReport> {
  if (!(opts.synthesisTimeout > 0))
    throw new UsageError('--synthesis-timeout must be a positive number of seconds');
  return withCampaign(campaignId, async (pool) => {
    // Temporal away: the report says so and answers from PostgreSQL and Kafka.
    const connecting = temporalClient();
    const t = await bounded('connecting to Temporal', 5000, () => connecting).catch(() => {
      connecting.then((c) => c.close()).catch(() => {});
      return null;
    });
    try {
      const r = await campaignStatus({ db: pool, temporal: t?.client ?? null }, campaignId, {
        relayName: opts.relayName,
        aggregatorGroup: opts.aggregatorGroup,
        synthesisTimeoutMs: opts.synthesisTimeout * 1000,
      });
      if (!r) throw new UsageError(`unknown campaign ${JSON.stringify(campaignId)}`);
      return r.workflow
        ? { ...r, workflow: { ...r.workflow, config: redactCampaignConfig(r.workflow.config) } }
        : r;
    } finally {
      await t?.close();
    }
  });
}

function printReport(r: CampaignStatusReport): void {
  const w = r.workflow;
  console.log(renderFindings(r, diagnose(r)));
  console.log(`  worker: ${r.worker.detail}`);
  if (w) {
    console.log(`  running syntheses: ${Object.keys(w.running).length}`);
    console.log(
      `  totals: selected ${w.totals.selected}, validated ${w.totals.validated}, rejected ${w.totals.rejected}, injected ${w.totals.injected}, retired ${w.totals.retired}, pruned ${w.totals.pruned}`,
    );
  }
  console.log(
    `  pool: ${r.pool.active} active ${JSON.stringify(r.pool.byOrigin)} by band ${JSON.stringify(r.pool.byBand)}, queue ${r.pool.queueLength}`,
  );
}

export function register(program: Command): void {
  const campaign = program
    .command('campaign')
    .description('start and steer a campaign (a long-running Temporal workflow)');

  campaign
    .command('start')
    .description('register a campaign from a JSON config file and start its workflow')
    .requiredOption(
      '--config <file>',
      'JSON: the campaign config (domain/campaign-config.ts), optionally with campaignId and name',
    )
    .option('--id <campaignId>', 'campaign id (overrides the file)')
    .option('--name <name>', 'human-readable name')
    .option('--until-step <n>', 'stop after this training step (default: run until stopped)', (v) =>
      Number.parseInt(v, 10),
    )
    .option('--json', 'JSON output')
    .action(
      async (opts: { config: string; id?: string; name?: string; untilStep?: number; json?: boolean }) => {
        const file = readConfigFile(opts.config);
        const campaignId = opts.id ?? file.campaignId;
        if (!campaignId || !/^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$/.test(campaignId)) {
          throw new UsageError(
            'a campaign id (--id or campaignId in the file) of letters, digits, . _ - is required',
          );
        }
        await migrate();
        const db = createPool({ application: 'rods-cli', max: 2 });
        const { client, close } = await temporalClient();
        try {
          const out = await startCampaign(
            {
              db,
              temporal: client,
              taskQueue: taskQueue(),
              generatorEndpoints: generatorEndpointNames(),
            },
            {
              campaignId,
              name: opts.name ?? file.name,
              config: file.config,
              untilStep: opts.untilStep,
              actor: 'cli',
            },
          ).catch((e: unknown) => {
            if (e instanceof CampaignExistsError) throw new UsageError(e.message);
            throw e;
          });
          if (opts.json) printJson(out);
          else
            console.log(
              `started campaign ${campaignId} (workflow ${out.workflowId}); run \`rods worker\` to drive it`,
            );
        } finally {
          await close();
          await db.end();
        }
      },
    );

  campaign
    .command('status <campaignId>')
    .description(
      'step, pool, worker and what holds the campaign (oldest open step, unpublished batches, overdue syntheses, relay and aggregator lag, dead letters); answers from PostgreSQL when no worker serves it (analysis/status/README.md)',
    )
    .option('--relay-name <name>', 'the relay whose lag to report (`rods relay --name`)', 'main')
    .option('--aggregator-group <group>', "the aggregators' consumer group", 'rods-aggregator')
    .option(
      '--synthesis-timeout <s>',
      'report syntheses running longer than this many seconds',
      positiveInt('--synthesis-timeout'),
      DEFAULT_SYNTHESIS_TIMEOUT_MS / 1000,
    )
    .option('--json', 'JSON output')
    .action(async (campaignId: string, opts: StatusCliOptions & { json?: boolean }) => {
      const r = await statusReport(campaignId, opts);
      if (opts.json) printJson(r);
      else printReport(r);
    });

  for (const [name, what] of [
    ['pause', 'stop planning new steps until resumed (running syntheses finish)'],
    ['resume', 'resume a paused campaign'],
  ] as const) {
    campaign
      .command(`${name} <campaignId>`)
      .description(what)
      .option('--json', 'JSON output')
      .action(async (campaignId: string, opts: { json?: boolean }) => {
        await control(campaignId, name, name === 'pause' ? [{}] : [], opts.json);
      });
  }

  campaign
    .command('stop <campaignId>')
    .description('stop the campaign for good (its history stays for replay and audit)')
    .option('--reason <text>', 'why')
    .option('--json', 'JSON output')
    .action(async (campaignId: string, opts: { reason?: string; json?: boolean }) => {
      await control(campaignId, 'stop', [{ reason: opts.reason }], opts.json);
    });

  campaign
    .command('reconfigure <campaignId>')
    .description(
      'apply a new config to a running campaign (refused with a message when a change cannot apply)',
    )
    .requiredOption('--config <file>', 'JSON config file')
    .option('--json', 'JSON output')
    .action(async (campaignId: string, opts: { config: string; json?: boolean }) => {
      const file = readConfigFile(opts.config);
      await control(campaignId, 'reconfigure', [{ config: file.config }], opts.json);
    });

  program
    .command('pool')
    .description(
      "a campaign's training pool: version, members by origin and band, queue, retired and pruned counts",
    )
    .requiredOption('--campaign <id>', 'campaign id')
    .option('--json', 'JSON output')
    .action(async (opts: { campaign: string; json?: boolean }) => {
      await withCampaign(opts.campaign, async (pool) => {
        const v = await poolView(pool, opts.campaign);
        if (opts.json) printJson(v);
        else
          console.log(
            `pool v${v.poolVersion} (step ${v.step}): ${v.active} active ${JSON.stringify(v.byOrigin)}, by band ${JSON.stringify(v.byBand)}, queue ${v.queueLength}, retired ${v.retired}, pruned ${v.pruned}`,
          );
      });
    });
}
