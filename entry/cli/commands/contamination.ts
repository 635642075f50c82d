// `rods contamination --campaign C`: the active pool's nearest evaluation tasks (domain/contamination.ts)
// under the campaign's rule, and how many candidates the gate rejected as eval-contamination.
import type { Command } from 'commander';
import { evaluationSet } from '../../../activities/eval-set.js';
import { ExecutorClient } from '../../../activities/executor-client.js';
import type { CandidateTask } from '../../../domain/candidate.js';
import { poolContamination } from '../../../domain/contamination.js';
import { loadCampaign } from '../../../platform/store/campaigns.js';
import { createPool } from '../../../platform/store/db.js';
import { activePool } from '../../../platform/store/pool/active.js';
import { rejectionsWithReason } from '../../../platform/store/pool/funnel.js';
import { UsageError } from '../errors.js';
import { positiveInt } from '../options.js';
import { printJson } from '../output.js';

interface Opts {
  campaign: string;
  top: number;
  seeds?: boolean;
  json?: boolean;
}

export function register(program: Command): void {
  program
    .command('contamination')
    .description(
      "the active pool's nearest evaluation tasks (the BFCL multi-turn tasks past the campaign's seeds, from the " +
        "executor's pinned bfcl-eval): per task the shared share of user-turn n-grams and whether the ground-truth " +
        "calls and the initial state are the same, under the campaign's synthesis.contamination rule; and how many " +
        'candidates the gate rejected as eval-contamination. Needs the executor (RODS_EXECUTOR_URL).',
    )
    .requiredOption('--campaign <id>', 'campaign id')
    .option('--top <n>', 'tasks listed, nearest first', positiveInt('--top'), 20)
    .option(
      '--seeds',
      'compare the seeds too (by construction none is an evaluation task: a check of the split)',
    )
    .option('--json', 'JSON report (every task compared, nearest first)')
    .action(async (opts: Opts) => {
      const db = createPool({ application: 'rods-contamination', max: 2 });
      try {
        const campaign = await loadCampaign(db, opts.campaign);
        if (!campaign) throw new UsageError(`unknown campaign ${JSON.stringify(opts.campaign)}`);
        const rule = campaign.config.synthesis.contamination;
        const perCategory = campaign.config.seeds?.perCategory ?? 100;
        const pool = await activePool(db, opts.campaign);
        const tasks = pool.tasks
          .filter((t) => opts.seeds || t.origin !== 'seed')
          .map((t) => ({ ...t, task: t.task as CandidateTask }));
        const evalSet = await evaluationSet(new ExecutorClient(), perCategory, rule.ngram);
        const r = poolContamination(tasks, evalSet, rule);
        const rejected = await rejectionsWithReason(db, opts.campaign, 'eval-contamination');
        const report = {
          campaignId: opts.campaign,
          poolVersion: pool.version,
          step: pool.step,
          rule,
          evaluationTasks: evalSet.length,
          evaluationSet: `BFCL multi-turn tasks from index ${perCategory} of each category`,
          compared: r.compared,
          contaminated: r.contaminated,
          maxTextOverlap: r.maxTextOverlap,
          rejectedAsContamination: rejected,
          nearest: opts.json ? r.nearest : r.nearest.slice(0, opts.top),
        };
        if (opts.json) {
          printJson(report);
          return;
        }
        console.log(
          `campaign ${report.campaignId} at step ${report.step} (pool v${report.poolVersion}): ` +
            `${report.compared} ${opts.seeds ? 'active' : 'generated active'} tasks against ${report.evaluationTasks} evaluation tasks (${report.evaluationSet})`,
        );
        console.log(
          `rule: ${rule.enabled ? '' : 'gate OFF; '}${rule.ngram}-gram overlap >= ${rule.textOverlap}` +
            `${rule.sameCallsAndState ? ', or the same calls from the same state' : ''}`,
        );
        console.log(
          `contaminated in the pool: ${report.contaminated}; largest overlap ${report.maxTextOverlap.toFixed(3)}; ` +
            `rejected by the gate so far: ${report.rejectedAsContamination}`,
        );
        if (report.nearest.length === 0) return;
        console.log(
          '\n  task                              nearest evaluation task       overlap  calls  state',
        );
        for (const m of report.nearest)
          console.log(
            `${m.contaminated ? '!' : ' '} ${m.taskId.padEnd(33)} ${m.evalTaskId.padEnd(29)} ${m.textOverlap.toFixed(3).padStart(7)}  ` +
              `${(m.sameCalls ? 'same' : '-').padEnd(5)}  ${m.sameState ? 'same' : '-'}`,
          );
      } finally {
        await db.end();
      }
    });
}
