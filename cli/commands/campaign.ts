// `rods campaign start|status|pause|resume|stop|reconfigure` and `rods pool`.
import { readFileSync } from 'node:fs';
import { WorkflowNotFoundError, WorkflowUpdateFailedError } from '@temporalio/client';
import type { Command } from 'commander';
import { parseCampaignConfig } from '../../domain/campaign-config.js';
import { loadCampaign, registerCampaign } from '../../store/campaigns.js';
import { createPool, type Pool } from '../../store/db.js';
import { migrate } from '../../store/migrate.js';
import { temporalClient } from '../../temporal/connect.js';
import { taskQueue } from '../../temporal/worker.js';
import type { CampaignStatus } from '../../workflows/campaign.js';
import { UsageError } from '../errors.js';
import { printJson } from '../output.js';

export const campaignWorkflowId = (campaignId: string) => `campaign-${campaignId}`;

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
  try {
    parseCampaignConfig(config);
  } catch (e) {
    throw new UsageError(`${file}: ${(e as Error).message}`);
  }
  return {
    campaignId: typeof campaignId === 'string' ? campaignId : undefined,
    name: typeof name === 'string' ? name : undefined,
    config,
  };
}

export interface PoolView {
  campaignId: string;
  poolVersion: number;
  step: number;
  active: number;
  byOrigin: Record<string, number>;
  byBand: Record<string, number>;
  byOriginAndBand: Record<string, Record<string, number>>;
  queueLength: number;
  retired: number;
  pruned: number;
  candidates: Record<string, number>;
}

export async function poolView(pool: Pool, campaignId: string): Promise<PoolView> {
  const v = await pool.query<{ version: number; step: number }>(
    'select version, step from pool_versions where campaign_id = $1',
    [campaignId],
  );
  const members = await pool.query<{
    origin: string;
    band: string | null;
    active: boolean;
    removed_rule: string | null;
    n: number;
  }>(
    `select m.origin, s.band, m.active, m.removed_rule, count(*)::int as n
       from pool_members m left join task_stats s on s.campaign_id = m.campaign_id and s.task_id = m.task_id
      where m.campaign_id = $1 group by 1, 2, 3, 4`,
    [campaignId],
  );
  const cands = await pool.query<{ status: string; n: number }>(
    'select status, count(*)::int as n from candidates where campaign_id = $1 group by 1',
    [campaignId],
  );
  const view: PoolView = {
    campaignId,
    poolVersion: v.rows[0]?.version ?? 0,
    step: v.rows[0]?.step ?? 0,
    active: 0,
    byOrigin: {},
    byBand: {},
    byOriginAndBand: {},
    queueLength: 0,
    retired: 0,
    pruned: 0,
    candidates: Object.fromEntries(cands.rows.map((r) => [r.status, r.n])),
  };
  for (const r of members.rows) {
    if (!r.active) {
      if (r.removed_rule === 'pruned') view.pruned += r.n;
      else view.retired += r.n;
      continue;
    }
    const band = r.band ?? 'unobserved';
    view.active += r.n;
    view.byOrigin[r.origin] = (view.byOrigin[r.origin] ?? 0) + r.n;
    view.byBand[band] = (view.byBand[band] ?? 0) + r.n;
    view.byOriginAndBand[r.origin] ??= {};
    view.byOriginAndBand[r.origin]![band] = (view.byOriginAndBand[r.origin]![band] ?? 0) + r.n;
  }
  view.queueLength = view.candidates.validated ?? 0;
  return view;
}

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

async function update(campaignId: string, name: string, args: unknown[] = []): Promise<CampaignStatus> {
  const { client, close } = await temporalClient();
  try {
    const handle = client.workflow.getHandle(campaignWorkflowId(campaignId));
    return (await handle.executeUpdate(name, { args: args as [unknown] })) as CampaignStatus;
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
        const pool = createPool({ application: 'rods-cli', max: 2 });
        try {
          if (await loadCampaign(pool, campaignId))
            throw new UsageError(`campaign ${campaignId} already exists`);
          await registerCampaign(pool, {
            campaignId,
            name: opts.name ?? file.name,
            config: file.config,
            actor: 'cli',
          });
        } finally {
          await pool.end();
        }
        const { client, close } = await temporalClient();
        try {
          const handle = await client.workflow.start('campaignWorkflow', {
            taskQueue: taskQueue(),
            workflowId: campaignWorkflowId(campaignId),
            args: [
              {
                campaignId,
                config: file.config,
                ...(opts.untilStep !== undefined ? { untilStep: opts.untilStep } : {}),
              },
            ],
          });
          const out = { campaignId, workflowId: handle.workflowId, runId: handle.firstExecutionRunId };
          if (opts.json) printJson(out);
          else
            console.log(
              `started campaign ${campaignId} (workflow ${handle.workflowId}); run \`rods worker\` to drive it`,
            );
        } finally {
          await close();
        }
      },
    );

  campaign
    .command('status <campaignId>')
    .description(
      'config, step, pool version, pool members by origin and band, queue length, running syntheses',
    )
    .option('--json', 'JSON output')
    .action(async (campaignId: string, opts: { json?: boolean }) => {
      await withCampaign(campaignId, async (pool) => {
        const s = await update(campaignId, 'status');
        const out = { ...s, pool: await poolView(pool, campaignId) };
        if (opts.json) printJson(out);
        else printStatus(out);
      });
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
        await withCampaign(campaignId, async () => {
          const s = await update(campaignId, name, name === 'pause' ? [{}] : []);
          if (opts.json) printJson(s);
          else printStatus(s);
        });
      });
  }

  campaign
    .command('stop <campaignId>')
    .description('stop the campaign for good (its history stays for replay and audit)')
    .option('--reason <text>', 'why')
    .option('--json', 'JSON output')
    .action(async (campaignId: string, opts: { reason?: string; json?: boolean }) => {
      await withCampaign(campaignId, async () => {
        const s = await update(campaignId, 'stop', [{ reason: opts.reason }]);
        if (opts.json) printJson(s);
        else printStatus(s);
      });
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
      await withCampaign(campaignId, async () => {
        const s = await update(campaignId, 'reconfigure', [{ config: file.config }]);
        if (opts.json) printJson(s);
        else printStatus(s);
      });
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
