// `rods eval`: score a checkpoint on BFCL's held-out multi-turn tasks with bfcl-eval's own
// inference loop and checker (a Temporal workflow, workflows/evaluation.ts, run by `rods worker`),
// show an evaluation, list them, and compare two with 95 % intervals beside what the two
// checkpoints were trained on (their manifests' difference).
import { WorkflowExecutionAlreadyStartedError } from '@temporalio/client';
import cliProgress from 'cli-progress';
import type { Command } from 'commander';
import type { EvaluationInput } from '../../../activities/evaluation.js';
import { recordedManifest } from '../../../analysis/manifest/manifest.js';
import {
  type EvaluationWorkflowView,
  evaluationWorkflowView,
  waitingLines,
} from '../../../analysis/status/evaluation-workflow.js';
import {
  accuracyRow,
  compareAccuracy,
  type EvaluationTask,
  endpointUrlIssue,
  evaluationInputOf,
  multiTurnTask,
  wilson,
} from '../../../domain/evaluation.js';
import { workflowIds } from '../../../domain/ids.js';
import { diffManifests } from '../../../domain/manifest.js';
import { SEED_CATEGORIES, type SeedCategory } from '../../../domain/task.js';
import { createPool, type Pool } from '../../../platform/store/db.js';
import {
  type EvaluationView,
  evaluationIds,
  evaluationView,
  evaluationViews,
} from '../../../platform/store/events/evaluations.js';
import { migrate } from '../../../platform/store/migrate.js';
import { taskQueue, temporalClient } from '../../../platform/temporal/connect.js';
import { evaluationWorkflow } from '../../../workflows/evaluation.js';
import { UsageError } from '../errors.js';
import { printJson } from '../output.js';

const withDb = async <T>(fn: (db: Pool) => Promise<T>): Promise<T> => {
  const db = createPool({ application: 'rods-eval', max: 2 });
  try {
    return await fn(db);
  } finally {
    await db.end();
  }
};

/** `--tasks multi_turn_base_150,multi_turn_miss_func_160`: the category is in the id. */
export function parseTaskList(list: string): EvaluationTask[] {
  const ids = list
    .split(',')
    .map((x) => x.trim())
    .filter(Boolean);
  if (ids.length === 0) throw new UsageError('--tasks: give at least one BFCL task id');
  return ids.map((taskId) => {
    const task = multiTurnTask(taskId);
    if (!task)
      throw new UsageError(
        `--tasks: ${JSON.stringify(taskId)} is not a BFCL multi-turn task id (multi_turn_<category>_<n>)`,
      );
    return task;
  });
}

function parseCategories(list: string | undefined): SeedCategory[] | undefined {
  if (list === undefined) return undefined;
  const out = list.split(',').map((x) => x.trim());
  for (const c of out)
    if (!(SEED_CATEGORIES as readonly string[]).includes(c))
      throw new UsageError(`--categories: ${JSON.stringify(c)} is not one of ${SEED_CATEGORIES.join(', ')}`);
  return out as SeedCategory[];
}

const pct = (x: number) => `${(100 * x).toFixed(1)}%`;
const ci = ([lo, hi]: [number, number]) => `[${pct(lo)}, ${pct(hi)}]`;

/** The JSON of a view: accuracy and its interval per category and overall. */
function summary(v: EvaluationView, withOutcomes: boolean) {
  const { outcomes, ...rest } = v;
  return {
    ...rest,
    categories: v.categories.map(accuracyRow),
    overall: accuracyRow({ category: 'overall', correct: v.correct, total: v.total }),
    secondsPerTask: v.scored > 0 ? v.taskMs / v.scored / 1000 : null,
    ...(withOutcomes ? { outcomes } : {}),
  };
}

function printView(v: EvaluationView, withOutcomes: boolean): void {
  console.log(
    `evaluation ${v.evaluationId}: ${v.status}${v.reason ? ` (${v.reason})` : ''}, ${v.scored}/${v.tasks} tasks scored`,
  );
  console.log(
    `  campaign ${v.campaignId}, checkpoint ${v.checkpointId ?? '(none: a base endpoint)'}` +
      (v.trainerStep !== null ? ` at step ${v.trainerStep}` : '') +
      (v.manifestRoot ? `, manifest root ${v.manifestRoot.slice(0, 16)}…` : ''),
  );
  console.log(`  endpoint ${v.endpoint}, model ${v.model}, bfcl-eval ${v.bfclEvalVersion}`);
  for (const c of [...v.categories, { category: 'overall', correct: v.correct, total: v.total }])
    console.log(
      `  ${c.category.padEnd(13)} ${String(c.correct).padStart(4)}/${String(c.total).padEnd(4)} ${
        c.total ? pct(c.correct / c.total).padStart(6) : '     -'
      }  95% ${ci(wilson(c.correct, c.total))}`,
    );
  if (v.scored > 0)
    console.log(`  ${(v.taskMs / v.scored / 1000).toFixed(2)} s per task (inference and check)`);
  if (withOutcomes)
    for (const o of v.outcomes)
      console.log(
        `  ${o.valid ? 'ok  ' : 'FAIL'} ${o.taskId} turns ${o.turns} calls ${o.toolCalls}${
          o.valid ? '' : `: ${o.errorType ?? ''} ${(o.error ?? '').slice(0, 160)}`
        }`,
      );
}

async function workflowOf(evaluationId: string): Promise<EvaluationWorkflowView> {
  const { client, close } = await temporalClient({ lazy: true });
  try {
    return await evaluationWorkflowView(client, evaluationId, { timeoutMs: 5000 });
  } finally {
    await close();
  }
}

async function viewOrFail(db: Pool, id: string): Promise<EvaluationView> {
  const v = await evaluationView(db, id);
  if (!v) throw new UsageError(`no evaluation ${JSON.stringify(id)} recorded (rods eval list names them)`);
  return v;
}

export function register(program: Command): void {
  const ev = program
    .command('eval')
    .description(
      "score a checkpoint on BFCL's held-out multi-turn tasks (the contamination gate's evaluation set: every category's " +
        "tasks past the campaign's seeds) against an OpenAI-compatible endpoint serving it, with bfcl-eval's own " +
        "multi-turn inference and checker, recorded as events beside the checkpoint's manifest root. Subcommands: run, show, list, compare.",
    );

  ev.command('run')
    .description(
      'start (or resume) an evaluation as a Temporal workflow run by `rods worker`; the same campaign, checkpoint, model and ' +
        'task selection name the same evaluation, so running it again resumes it without scoring a finished task twice',
    )
    .requiredOption('--campaign <id>', 'campaign id')
    .option(
      '--checkpoint <id>',
      'checkpoint id (rods manifest list names them); without it the endpoint is scored as a base model',
    )
    .requiredOption(
      '--endpoint <url>',
      "base URL of the OpenAI-compatible endpoint serving the checkpoint (e.g. http://127.0.0.1:8000/v1); {category} in it is replaced by each task's category",
    )
    .requiredOption('--model <name>', 'model name the endpoint serves')
    .option(
      '--api-key-env <name>',
      "the worker's environment variable holding the endpoint's API key (a key never enters the workflow's history)",
    )
    .option('--per-category <n>', 'at most n held-out tasks per category (default: all)', (v) => Number(v))
    .option('--categories <list>', `categories of the held-out split (default: ${SEED_CATEGORIES.join(',')})`)
    .option('--tasks <ids>', 'score these BFCL task ids instead of the held-out split (comma-separated)')
    .option('--concurrency <n>', 'tasks scored at once', (v) => Number(v), 1)
    .option('--max-steps-per-turn <n>', "bfcl-eval's step limit per user turn", (v) => Number(v))
    .option(
      '--endpoint-attempts <n>',
      'attempts at a task whose endpoint fails before the evaluation ends with the reason',
      (v) => Number(v),
      5,
    )
    .option('--no-wait', 'start it and return (rods eval show follows it)')
    .option('--json', 'JSON output')
    .action(
      async (opts: {
        campaign: string;
        checkpoint?: string;
        endpoint: string;
        model: string;
        apiKeyEnv?: string;
        perCategory?: number;
        categories?: string;
        tasks?: string;
        concurrency: number;
        maxStepsPerTurn?: number;
        endpointAttempts: number;
        wait: boolean;
        json?: boolean;
      }) => {
        for (const [flag, v] of [
          ['--per-category', opts.perCategory],
          ['--concurrency', opts.concurrency],
          ['--max-steps-per-turn', opts.maxStepsPerTurn],
          ['--endpoint-attempts', opts.endpointAttempts],
        ] as const)
          if (v !== undefined && !(Number.isInteger(v) && v >= 1))
            throw new UsageError(`${flag} must be a whole number >= 1`);
        const urlIssue = endpointUrlIssue(opts.endpoint.replaceAll('{category}', 'base'));
        if (urlIssue) throw new UsageError(`--endpoint: ${JSON.stringify(opts.endpoint)} ${urlIssue}`);
        if (opts.tasks && (opts.perCategory !== undefined || opts.categories))
          throw new UsageError('--tasks names the tasks: give it without --per-category and --categories');
        const tasks = opts.tasks ? parseTaskList(opts.tasks) : undefined;
        const categories = parseCategories(opts.categories);
        const input: EvaluationInput = evaluationInputOf({
          campaignId: opts.campaign,
          checkpointId: opts.checkpoint ?? null,
          endpoint: {
            baseUrl: opts.endpoint,
            model: opts.model,
            ...(opts.apiKeyEnv ? { apiKeyEnv: opts.apiKeyEnv } : {}),
          },
          ...(tasks ? { tasks } : {}),
          ...(categories ? { categories } : {}),
          ...(opts.perCategory !== undefined ? { perCategory: opts.perCategory } : {}),
          concurrency: opts.concurrency,
          ...(opts.maxStepsPerTurn !== undefined ? { maxStepsPerTurn: opts.maxStepsPerTurn } : {}),
          endpointAttempts: opts.endpointAttempts,
        });
        const { evaluationId } = input;
        await migrate();
        const { client, close } = await temporalClient();
        try {
          const workflowId = workflowIds.evaluation(evaluationId);
          let resumed = false;
          try {
            await client.workflow.start(evaluationWorkflow, {
              taskQueue: taskQueue(),
              workflowId,
              args: [input],
            });
          } catch (e) {
            if (!(e instanceof WorkflowExecutionAlreadyStartedError)) throw e;
            resumed = true; // running already: follow it
          }
          if (!opts.wait) {
            if (opts.json) printJson({ evaluationId, workflowId, attached: resumed });
            else
              console.log(
                `evaluation ${evaluationId} ${resumed ? 'is running' : 'started'} (workflow ${workflowId}); rods eval show ${evaluationId}`,
              );
            return;
          }
          const bar =
            opts.json || !process.stderr.isTTY
              ? undefined
              : new cliProgress.SingleBar(
                  { format: 'eval {bar} {value}/{total} tasks', stream: process.stderr },
                  cliProgress.Presets.shades_classic,
                );
          const handle = client.workflow.getHandle(workflowId);
          const done = handle.result().then(
            () => undefined,
            (e: unknown) => e,
          );
          await withDb(async (db) => {
            let settled = false;
            void done.then(() => {
              settled = true;
            });
            while (!settled) {
              const v = await evaluationView(db, evaluationId);
              if (v && bar) {
                if (!bar.getTotal()) bar.start(v.tasks, v.scored);
                bar.update(v.scored);
              }
              await Promise.race([done, new Promise((r) => setTimeout(r, 1000))]);
            }
            bar?.stop();
            const err = await done;
            const v = await evaluationView(db, evaluationId);
            if (!v) throw err ?? new Error(`evaluation ${evaluationId} ended without recording its start`);
            if (opts.json) printJson(summary(v, false));
            else printView(v, false);
            if (v.status !== 'completed') process.exitCode = 1;
          });
        } finally {
          await close();
        }
      },
    );

  ev.command('show')
    .description(
      'an evaluation: what was scored against what, accuracy per category with 95% intervals, how it ended',
    )
    .argument('<id>', 'evaluation id (rods eval list names them)')
    .option('--tasks', "each task's outcome")
    .option('--json', 'JSON output (with every task outcome)')
    .action(async (id: string, opts: { tasks?: boolean; json?: boolean }) => {
      await withDb(async (db) => {
        const v = await viewOrFail(db, id);
        // A running evaluation that does not move says why: its workflow's pending activities.
        const workflow = v.status === 'running' ? await workflowOf(v.evaluationId) : undefined;
        if (opts.json) printJson({ ...summary(v, true), ...(workflow ? { workflow } : {}) });
        else {
          printView(v, Boolean(opts.tasks));
          if (workflow) for (const line of waitingLines(workflow)) console.log(line);
        }
      });
    });

  ev.command('list')
    .description('the recorded evaluations, oldest first')
    .option('--campaign <id>', 'of this campaign only')
    .option('--json', 'JSON output')
    .action(async (opts: { campaign?: string; json?: boolean }) => {
      await withDb(async (db) => {
        const views = await evaluationViews(db, await evaluationIds(db, opts.campaign));
        if (opts.json) {
          printJson(views.map((v) => summary(v, false)));
          return;
        }
        if (views.length === 0) console.log('no evaluation recorded');
        for (const v of views)
          console.log(
            `${v.evaluationId}  ${v.status.padEnd(9)} ${v.checkpointId ?? '-'} step ${v.trainerStep ?? '-'}  ` +
              `${v.correct}/${v.total} ${v.total ? pct(v.correct / v.total) : '-'}  (${v.scored}/${v.tasks} scored)`,
          );
      });
    });

  ev.command('compare')
    .description(
      'two evaluations side by side (two checkpoints, or two campaigns such as the method against its static ablation): ' +
        "accuracy per category and overall with 95% Wilson intervals, the difference with Newcombe's 95% interval, " +
        "and what the two checkpoints were trained on that the other was not (their manifests' difference)",
    )
    .argument('<a>', 'evaluation id')
    .argument('<b>', 'evaluation id')
    .option('--json', 'JSON output')
    .action(async (a: string, b: string, opts: { json?: boolean }) => {
      await withDb(async (db) => {
        const va = await viewOrFail(db, a);
        const vb = await viewOrFail(db, b);
        const rows = compareAccuracy(va.categories, vb.categories);
        let manifests: ReturnType<typeof diffManifests> | null = null;
        if (va.checkpointId && vb.checkpointId) {
          const ma = await recordedManifest(db, va.campaignId, va.checkpointId);
          const mb = await recordedManifest(db, vb.campaignId, vb.checkpointId);
          manifests = diffManifests(ma.manifest, mb.manifest, va.campaignId === vb.campaignId);
        }
        const differentTasks =
          va.outcomes.length !== vb.outcomes.length ||
          va.outcomes.some((o) => !vb.outcomes.find((x) => x.taskId === o.taskId));
        if (opts.json) {
          printJson({
            a: summary(va, false),
            b: summary(vb, false),
            sameTasks: !differentTasks,
            categories: rows,
            manifests: manifests && {
              sameRoot: manifests.sameRoot,
              a: manifests.a,
              b: manifests.b,
              counts: manifests.counts,
              tasksOnlyA: manifests.tasksOnlyA,
              tasksOnlyB: manifests.tasksOnlyB,
            },
          });
          return;
        }
        console.log(`a: ${va.evaluationId} (${va.checkpointId ?? 'base'}, ${va.model}, ${va.status})`);
        console.log(`b: ${vb.evaluationId} (${vb.checkpointId ?? 'base'}, ${vb.model}, ${vb.status})`);
        if (differentTasks) console.log('  note: the two scored different tasks');
        for (const r of rows)
          console.log(
            `  ${r.category.padEnd(13)} a ${pct(r.a.accuracy).padStart(6)} ${ci(r.a.interval)}  b ${pct(r.b.accuracy).padStart(6)} ${ci(
              r.b.interval,
            )}  b-a ${(r.difference >= 0 ? '+' : '') + pct(r.difference)} ${ci(r.differenceInterval)}${r.significant ? ' *' : ''}`,
          );
        if (manifests)
          console.log(
            `  manifests: ${manifests.sameRoot ? 'the same' : 'different'}; tasks only in a: ${manifests.tasksOnlyA.length}, only in b: ${manifests.tasksOnlyB.length}; steps differing: ${manifests.counts.differs}`,
          );
        else console.log('  manifests: not compared (an evaluation without a checkpoint)');
      });
    });
}
