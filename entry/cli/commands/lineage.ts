// `rods lineage TASK_ID [--campaign C] [--format tree|json|dot|mermaid]`: a task's ancestry back
// to its human seed, from the event store (analysis/lineage/); `rods lineage --campaign C --stats`:
// the pool summarised by generation.
import type { Command } from 'commander';
import {
  LINEAGE_FORMATS,
  type LineageFormat,
  renderLineage,
} from '../../../analysis/lineage/render/formats.js';
import { lineageStats } from '../../../analysis/lineage/stats.js';
import { campaignHasEvents, campaignsOfTask, loadLineageIndex } from '../../../analysis/lineage/store.js';
import { loadCampaign } from '../../../platform/store/campaigns.js';
import { createPool } from '../../../platform/store/db.js';
import { DEFAULT_HISTORY_STEPS } from '../../../platform/store/events/task-steps.js';
import { UsageError } from '../errors.js';
import { positiveInt } from '../options.js';
import { printJson } from '../output.js';

interface Opts {
  campaign?: string;
  format: string;
  stats?: boolean;
  json?: boolean;
  steps?: number;
}

export function register(program: Command): void {
  program
    .command('lineage [taskId]')
    .description(
      "a task's ancestry back to its human seed (per derivation: step, policy version, triggering statistics, " +
        'models and prompt versions per stage, output hashes, judge verdict, synthesis id) and its life in the ' +
        'pool (injected, band changes, retired/pruned); with --stats, the pool summarised by generation',
    )
    .option(
      '--campaign <id>',
      'campaign id (required when the task id is in several campaigns, and with --stats)',
    )
    .option('--format <format>', `output format: ${LINEAGE_FORMATS.join('|')}`, 'tree')
    .option(
      '--stats',
      'per-generation summary of the campaign: tasks, injected, active, retired, pruned, branching, survival',
    )
    .option(
      '--steps <n>',
      `band changes from the per-step statistics records of the newest N steps (default ${DEFAULT_HISTORY_STEPS}); each step more is read`,
      positiveInt('--steps'),
    )
    .option('--json', 'JSON output (same as --format json)')
    .action(async (taskId: string | undefined, opts: Opts) => {
      const format = (opts.json ? 'json' : opts.format) as LineageFormat;
      if (!LINEAGE_FORMATS.includes(format))
        throw new UsageError(`--format: expected one of ${LINEAGE_FORMATS.join(', ')}, got ${opts.format}`);
      const pool = createPool({ application: 'rods-lineage', max: 2, limits: { statementTimeoutMs: 0 } });
      try {
        if (opts.stats) {
          if (!opts.campaign) throw new UsageError('--stats needs --campaign');
          if (taskId !== undefined) throw new UsageError('--stats summarises a campaign: give no task id');
          if (!(await loadCampaign(pool, opts.campaign)) && !(await campaignHasEvents(pool, opts.campaign)))
            throw new UsageError(`unknown campaign ${JSON.stringify(opts.campaign)}`);
          const s = lineageStats(await loadLineageIndex(pool, opts.campaign));
          if (format === 'json') printJson(s);
          else {
            console.log(`campaign ${s.campaignId}: ${s.tasks} tasks`);
            for (const g of s.generations)
              console.log(
                `  depth ${g.depth}: ${g.tasks} tasks, ${g.injected} injected, ${g.active} active, ${g.retired} retired, ` +
                  `${g.pruned} pruned, branching ${g.meanBranching.toFixed(2)}, survival ${(100 * g.survivalShare).toFixed(1)}%`,
              );
          }
          return;
        }
        if (taskId === undefined) throw new UsageError('give a task id (or --campaign C --stats)');
        let campaignId = opts.campaign;
        if (campaignId === undefined) {
          const found = await campaignsOfTask(pool, taskId);
          if (found.length === 0)
            throw new UsageError(`unknown task ${JSON.stringify(taskId)}: no campaign has a record of it`);
          if (found.length > 1)
            throw new UsageError(
              `task ${JSON.stringify(taskId)} is in several campaigns (${found.join(', ')}); pass --campaign`,
            );
          campaignId = found[0]!;
        } else if (!(await loadCampaign(pool, campaignId)) && !(await campaignHasEvents(pool, campaignId))) {
          throw new UsageError(`unknown campaign ${JSON.stringify(campaignId)}`);
        }
        const index = await loadLineageIndex(pool, campaignId, taskId, { steps: opts.steps });
        const l = index.lineage(taskId);
        if (!l) throw new UsageError(`unknown task ${JSON.stringify(taskId)} in campaign ${campaignId}`);
        process.stdout.write(renderLineage(l, format));
      } finally {
        await pool.end();
      }
    });
}
